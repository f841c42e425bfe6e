// Op benchmarks: times every registered OpBench with CUDA events and compares it with its
// baseline — the card's device-to-device copy bandwidth, or a named reference call — printing a
// table and writing bench/results/ops-<card>.{md,json} (card, date, commit in the header).
//
// Each timed iteration starts with a cold L2 (a 256 MiB scratch buffer is read between
// iterations; see l2_flush.cu for why it is read, not written), so tensors smaller than the cache
// (50-60 MB on Hopper) are not timed from cache. The figure is the median over the iterations.
//
// Usage: bench_ops [--out DIR] [--filter SUBSTRING] [--iters N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/ops/bench_registry.h"
#include "bench/ops/l2_flush.h"
#include "core/cuda/check.h"
#include "core/device.h"
#include "core/tensor.h"

namespace ft::bench {

std::vector<std::pair<std::string, BenchFactory>>& registry() {
  static std::vector<std::pair<std::string, BenchFactory>> r;
  return r;
}
Registration::Registration(const std::string& family, BenchFactory make) {
  registry().emplace_back(family, std::move(make));
}

namespace {

struct Timer {
  cudaStream_t stream;
  Tensor scratch = Tensor::zeros({256 << 20}, DType::U8, Device::cuda());
  Tensor sink = Tensor::zeros({1}, DType::I32, Device::cuda());
  cudaEvent_t start{}, stop{};
  explicit Timer(cudaStream_t s) : stream(s) {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  // Median milliseconds of `iters` cold-cache runs after `warmup` runs.
  double median_ms(const std::function<void()>& fn, int iters, int warmup = 3) {
    for (int i = 0; i < warmup; ++i) fn();
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) {
      flush_l2(scratch.data_ptr(), scratch.nbytes(), sink.data<int32_t>(), stream);
      CUDA_CHECK(cudaEventRecord(start, stream));
      fn();
      CUDA_CHECK(cudaEventRecord(stop, stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

std::string card_slug(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  while (s.find("--") != std::string::npos) s.erase(s.find("--"), 1);
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

}  // namespace
}  // namespace ft::bench

int main(int argc, char** argv) {
  using namespace ft;
  using namespace ft::bench;
  std::string out_dir = "bench/results", filter;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_dir = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_ops [--out DIR] [--filter SUBSTRING] [--iters N]\n");
      return 2;
    }
  }
  try {
    if (!cuda_available()) {
      std::fprintf(stderr, "bench_ops: no CUDA device; the op benchmarks run on a GPU\n");
      return 1;
    }
    cudaStream_t stream = stream_for(Device::cuda());
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    Timer timer(stream);

    // The copy ceiling: 1 GiB device-to-device, counting bytes read plus bytes written.
    Tensor a = Tensor::empty({1 << 30}, DType::U8, Device::cuda()), b = Tensor::empty({1 << 30}, DType::U8, Device::cuda());
    const double copy_ms = timer.median_ms([&] {
      CUDA_CHECK(cudaMemcpyAsync(b.data_ptr(), a.data_ptr(), a.nbytes(), cudaMemcpyDeviceToDevice, stream));
    }, iters);
    const double copy_gbs = 2.0 * a.nbytes() / (copy_ms * 1e6);
    a = b = Tensor();

    const char* commit = std::getenv("FT_COMMIT");
    std::string md = str("# Op benchmarks\n\ncard: ", prop.name, "  \ndate: ", today(), "  \ncommit: ",
                         commit ? commit : "unknown", "  \ndevice-to-device copy: ", copy_gbs, " GB/s (1 GiB, read+write)\n\n",
                         "Each row: median of ", iters, " cold-L2 runs. `ratio` is achieved bandwidth over the copy bandwidth, ",
                         "or for rows with a named baseline, baseline time over our time.\n\n",
                         "| op | ms | GB/s | TFLOP/s | baseline | ratio | bar | pass |\n|---|---|---|---|---|---|---|---|\n");
    nlohmann::ordered_json json = {{"card", prop.name}, {"date", today()}, {"commit", commit ? commit : "unknown"},
                                   {"copy_gbs", copy_gbs}, {"rows", nlohmann::ordered_json::array()}};
    std::printf("%-58s %9s %9s %9s %7s %5s\n", "op", "ms", "GB/s", "TFLOP/s", "ratio", "pass");
    int failures = 0;
    for (auto& [family, make] : registry()) {
      std::vector<OpBench> benches = make();
      std::map<std::string, double> times;
      for (OpBench& bench : benches) {
        if (!filter.empty() && bench.name.find(filter) == std::string::npos && family.find(filter) == std::string::npos) continue;
        const double ms = timer.median_ms(bench.run, iters);
        times[bench.name] = ms;
        const double gbs = bench.bytes / (ms * 1e6), tflops = bench.flops / (ms * 1e9);
        double ratio = gbs / copy_gbs;
        std::string base = "copy";
        if (bench.baseline != "copy") {
          base = bench.baseline;
          ratio = times.count(base) ? times[base] / ms : 0.0;
        }
        const bool pass = ratio >= bench.target;
        failures += !pass;
        std::printf("%-58s %9.4f %9.1f %9.1f %7.3f %5s\n", bench.name.c_str(), ms, gbs, tflops, ratio, pass ? "yes" : "NO");
        md += str("| ", bench.name, " | ", ms, " | ", gbs, " | ", tflops, " | ", base, " | ", ratio, " | ", bench.target, " | ",
                  pass ? "yes" : "**no**", " |\n");
        json["rows"].push_back({{"family", family}, {"op", bench.name}, {"ms", ms}, {"gbs", gbs}, {"tflops", tflops},
                                {"baseline", base}, {"ratio", ratio}, {"target", bench.target}, {"pass", pass}});
      }
    }
    const std::string stem = out_dir + "/ops-" + card_slug(prop.name);
    std::ofstream(stem + ".md") << md;
    std::ofstream(stem + ".json") << json.dump(2) << "\n";
    std::printf("copy bandwidth %.1f GB/s; wrote %s.{md,json}; %d below the bar\n", copy_gbs, stem.c_str(), failures);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ops: error: %s\n", e.what());
    return 1;
  }
}
