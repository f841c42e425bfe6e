// Op benchmarks register themselves here; bench_main times each with CUDA events and prints
// achieved bandwidth against the card's measured device-to-device copy bandwidth.
//
//   static ft::bench::Registration reg("layernorm", [] {
//     std::vector<ft::bench::OpBench> v;
//     auto x = ...;                                  // inputs made once, outside the timing
//     v.push_back({"layernorm fwd+bwd B*T=16384 C=768", bytes_moved, 0.0,
//                  [=] { ...launch the op(s)... }, "copy"});
//     return v;
//   });
//
// `bytes` counts the fewest bytes the op must move through device memory (each input read once,
// each output written once); `baseline` names what the ratio is taken against: "copy" (device
// copy bandwidth) or the name of another OpBench in the same list (e.g. a plain cuBLASLt call),
// whose time is then compared with this one's.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ft::bench {

struct OpBench {
  std::string name;
  double bytes = 0;
  double flops = 0;
  std::function<void()> run;  // issues the work on the device's stream; must not synchronise
  std::string baseline = "copy";
  double target = 0.7;        // the bar: ratio against the baseline that counts as passing
};

using BenchFactory = std::function<std::vector<OpBench>()>;

struct Registration {
  Registration(const std::string& family, BenchFactory make);
};

std::vector<std::pair<std::string, BenchFactory>>& registry();

}  // namespace ft::bench
