// GPT-2 tokenizer throughput on the KJV text (or any file), in MB/s of UTF-8 input.
//
//   ft_tokenizer_bench [--text FILE] [--write-text FILE] [--bpe-dir DIR] [--repeats N] [--json FILE]
//
// Without --text the text is the raw output of `bible -f Gen1:1-Rev22:21` (4.4 MB); --write-text
// saves it so tiktoken_bench.py can time the very same bytes elsewhere. Reported:
//   1 thread, cold: a fresh tokenizer (empty piece cache) per run -- comparable to tiktoken, which
//                   has no cache;
//   1 thread, warm: the same tokenizer again, every piece already cached;
//   all threads:    encode_parallel on hardware_concurrency() threads, cold.
// Each figure is the best of --repeats runs. The id count and an FNV-1a hash of the ids are
// printed so the tiktoken script's output can be checked to be the same ids.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/mapped_file.h"

namespace {

std::string run_bible() {
  std::FILE* p = ::popen("bible -f Gen1:1-Rev22:21", "r");
  if (!p) throw std::runtime_error("cannot run bible");
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  if (::pclose(p) != 0 || out.empty()) throw std::runtime_error("`bible` failed; apt-get install bible-kjv");
  return out;
}

uint64_t fnv1a_ids(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : ids) {
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  return h;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string text_path, write_path, bpe_dir, json_path;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--text") {
      text_path = value();
    } else if (a == "--write-text") {
      write_path = value();
    } else if (a == "--bpe-dir") {
      bpe_dir = value();
    } else if (a == "--repeats") {
      repeats = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--json") {
      json_path = value();
    } else {
      std::cerr << "usage: ft_tokenizer_bench [--text FILE] [--write-text FILE] [--bpe-dir DIR]\n"
                   "                          [--repeats N] [--json FILE]\n";
      return 2;
    }
  }
  try {
    const std::string text = text_path.empty() ? run_bible() : ft::read_file(text_path);
    if (!write_path.empty()) std::ofstream(write_path, std::ios::binary) << text;
    const double mb = static_cast<double>(text.size()) / 1e6;
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

    std::vector<int32_t> ids, ids_par;
    double cold = 1e30, warm = 1e30, par = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const ft::BpeTokenizer tok = ft::BpeTokenizer::load(bpe_dir);  // fresh instance: empty cache
      cold = std::min(cold, seconds_of([&] { ids = tok.encode(text); }));
      warm = std::min(warm, seconds_of([&] { ids = tok.encode(text); }));
      const ft::BpeTokenizer tok2 = ft::BpeTokenizer::load(bpe_dir);
      par = std::min(par, seconds_of([&] { ids_par = tok2.encode_parallel(text, false, threads); }));
      if (ids_par != ids) throw std::runtime_error("parallel ids differ from serial ids");
    }
    const uint64_t hash = fnv1a_ids(ids);
    char line[512];
    std::snprintf(line, sizeof(line),
                  "text %.2f MB, %zu tokens, ids fnv1a %016llx, pcre2 jit %s\n"
                  "1 thread, cold cache : %7.1f MB/s (%.3f s)\n"
                  "1 thread, warm cache : %7.1f MB/s (%.3f s)\n"
                  "%2d threads, cold    : %7.1f MB/s (%.3f s)\n",
                  mb, ids.size(), static_cast<unsigned long long>(hash),
                  ft::BpeTokenizer::load(bpe_dir).jit() ? "on" : "off", mb / cold, cold, mb / warm, warm, threads,
                  mb / par, par);
    std::cout << line;
    if (!json_path.empty()) {
      char fnv[17];  // the 64-bit hash in hex
      std::snprintf(fnv, sizeof(fnv), "%llx", static_cast<unsigned long long>(hash));
      const nlohmann::ordered_json j = {{"bytes", text.size()}, {"tokens", ids.size()}, {"ids_fnv1a", fnv},
                                        {"threads", threads}, {"mb_per_s_1thread_cold", mb / cold},
                                        {"mb_per_s_1thread_warm", mb / warm}, {"mb_per_s_all_threads", mb / par}};
      std::ofstream(json_path) << j.dump() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "ft_tokenizer_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
