// A kernel and copy tracer for any CUDA process, for machines without Nsight Systems (the device
// machines here have ncu, which serialises kernels and locks clocks, but no nsys).
//
// Loaded by the CUDA driver itself: run a program with
//   CUDA_INJECTION64_PATH=/path/to/libft_kernel_trace.so FT_KERNEL_TRACE_DIR=/tmp/trace program ...
// and when the process creates its first CUDA context the driver calls InitializeInjection()
// below, which turns on CUPTI's activity records for kernels (concurrent kind: kernels keep running
// side by side, and kernels replayed from CUDA graphs are recorded one node at a time, with the
// graph's id and the replay's correlation id) and for memory copies. No change to the program: the
// same library traces flashtrain, PyTorch or llm.c. Timestamps are the GPU's own, so a kernel's
// duration is what it took inside the running program, at the clocks and beside the traffic it
// really had.
//
// At exit every process writes FT_KERNEL_TRACE_DIR/trace-<pid>.tsv (default directory
// /tmp/ft-kernel-trace), one line a record:
//   device  kind  graph  correlation  start_ns  end_ns  bytes  name
// kind is K (kernel) or C (copy; name "copy <DtoD|HtoD|...>"), graph is 0 outside graphs, names are
// demangled. Memsets are kind M, name "memset" (cudaMemsetAsync: Tensor::zero_, the gradient
// buffer's zeroing). bench/profile/kernel_trace_summary.py reads these files (per kernel: calls, time per
// graph replay; and one trace against another). bench/profile/selftest.sh checks the tracer
// against a program whose kernels it knows.
#include <cupti.h>
#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <unordered_map>
#include <vector>

namespace {

struct Record {
  uint64_t start, end, bytes;
  uint32_t device, graph, correlation, name;
  char kind;
};

std::mutex g_mu;
std::vector<Record> g_records;
std::unordered_map<std::string, uint32_t> g_name_ids;
std::vector<std::string> g_names;
bool g_written = false;

constexpr size_t kBufferBytes = size_t{8} << 20;

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : name;
  std::free(d);
  for (char& c : out)
    if (c == '\t' || c == '\n') c = ' ';
  return out;
}

// Called with g_mu held.
uint32_t intern(const std::string& name) {
  auto it = g_name_ids.find(name);
  if (it != g_name_ids.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(g_names.size());
  g_names.push_back(name);
  g_name_ids.emplace(name, id);
  return id;
}

const char* copy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // A copy record, within a device or between two (their structs share these fields).
    auto add_copy = [](const auto* m) {
      g_records.push_back({m->start, m->end, m->bytes, m->deviceId, m->graphId, m->correlationId,
                           intern(std::string("copy ") + copy_kind(m->copyKind)), 'C'});
    };
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        g_records.push_back({k->start, k->end, 0, k->deviceId, k->graphId, k->correlationId, intern(demangle(k->name)), 'K'});
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        add_copy(reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec));
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
        add_copy(reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec));
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        g_records.push_back({m->start, m->end, m->bytes, m->deviceId, m->graphId, m->correlationId, intern("memset"), 'M'});
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
      std::fprintf(stderr, "ft_kernel_trace: CUPTI dropped %zu records\n", dropped);
  }
  std::free(buffer);
}

void write_trace() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_written) return;
  g_written = true;
  const char* env = std::getenv("FT_KERNEL_TRACE_DIR");
  const std::string dir = env && *env ? env : "/tmp/ft-kernel-trace";
  mkdir(dir.c_str(), 0755);  // an existing directory is fine
  const std::string path = dir + "/trace-" + std::to_string(getpid()) + ".tsv";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "ft_kernel_trace: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f, "device\tkind\tgraph\tcorrelation\tstart_ns\tend_ns\tbytes\tname\n");
  for (const Record& r : g_records)
    std::fprintf(f, "%u\t%c\t%u\t%u\t%llu\t%llu\t%llu\t%s\n", r.device, r.kind, r.graph, r.correlation,
                 static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end),
                 static_cast<unsigned long long>(r.bytes), g_names[r.name].c_str());
  std::fclose(f);
  std::fprintf(stderr, "ft_kernel_trace: %zu records in %s\n", g_records.size(), path.c_str());
}

bool check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "ft_kernel_trace: %s failed: %s (tracing off)\n", what, msg ? msg : "?");
  return false;
}

}  // namespace

// The CUDA driver's injection entry point (CUDA_INJECTION64_PATH). Returns 1 on success.
extern "C" int InitializeInjection(void) {
  if (!check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks"))
    return 0;
  if (!check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records")) return 0;
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling copy records");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2), "enabling peer copy records");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enabling memset records");
  // Registered after the CUDA runtime's own teardown (which ran before the first context), so it
  // runs before it: the context is still there to flush.
  std::atexit(write_trace);
  return 1;
}
