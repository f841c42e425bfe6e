// What bench/profile/selftest.sh runs under the tracer (kernel_trace.cpp): kernels whose count and
// duration it knows. Each kernel spins one thread for a number of clock cycles.
//   eager: spin_a x 10;
//   a graph of spin_a, spin_b, spin_a, replayed 20 times;
// and it prints, timed with CUDA events apart from all that, how long one spin_a and one spin_b
// take, for the check to compare the trace's durations with.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                   \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__global__ void spin_a(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
__global__ void spin_b(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

constexpr long long kCyclesA = 200000;   // about 0.1 ms at 1.98 GHz
constexpr long long kCyclesB = 1000000;  // about 0.5 ms

template <class F>
float time_ms(cudaStream_t s, F launch, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) launch();
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms / reps;
}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int i = 0; i < 10; ++i) spin_a<<<1, 1, 0, s>>>(kCyclesA);
  CHECK(cudaStreamSynchronize(s));

  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  spin_a<<<1, 1, 0, s>>>(kCyclesA);
  spin_b<<<1, 1, 0, s>>>(kCyclesB);
  spin_a<<<1, 1, 0, s>>>(kCyclesA);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 20; ++i) CHECK(cudaGraphLaunch(ge, s));
  CHECK(cudaStreamSynchronize(s));

  // The reference durations, timed after the traced work (the tracer records these launches too,
  // outside any graph: the check counts spin_a outside graphs as 10 + 20, spin_b as 20).
  const float a_ms = time_ms(s, [&] { spin_a<<<1, 1, 0, s>>>(kCyclesA); }, 20);
  const float b_ms = time_ms(s, [&] { spin_b<<<1, 1, 0, s>>>(kCyclesB); }, 20);
  std::printf("expect graph_replays=20 a_per_replay=2 b_per_replay=1 eager_a=30 eager_b=20 a_us=%.2f b_us=%.2f\n",
              a_ms * 1e3, b_ms * 1e3);
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
