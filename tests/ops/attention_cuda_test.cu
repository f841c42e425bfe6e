// GPU tests of flash and naive attention against the float64 CPU reference.
// Flash's error in every output is at most 2x naive attention's error in the same precision;
// flash and naive draw identical dropout masks; the dropped fraction matches p; block-sparse flash
// equals masked naive; fully masked rows give zeros; flash allocates nothing and its buffers grow
// linearly in T; dK and dV are bit-reproducible (dQ uses atomics: its spread is measured); the
// deterministic backward gives bit-identical dq, dk, dv in both its forms (fixed-point dQ, ordered
// dQ), and the fixed-point form's out-of-range heads come out NaN; a device offset base equals a plain offset;
// head dims 64, 128 and 256 (FlashCudaHeadDim256 and the _D256_ cases);
// scores that grow along the keys (the forward's lazy rescale) stay within twice naive's error;
// the kernel paths the default dispatch takes only for some T (or, the warp-specialised Hopper
// backward, not yet at all) run every case through their thresholds moved.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda/check.h"
#include "core/half.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_run.h"
#include "ops/cuda/naive_attention.h"
#include "tests/ops/device_buffer.h"
#include "tests/ops/attention_test_util.h"

namespace ft {
namespace {

using namespace testing_attention;

bool has_cuda_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define SKIP_WITHOUT_CUDA() \
  if (!has_cuda_device()) GTEST_SKIP() << "no CUDA device"

using testing_cuda::DeviceBuffer;

uint16_t to_bits(AttentionDType dt, float x) {
  return dt == AttentionDType::kBF16 ? float_to_bf16(x).bits : float_to_f16(x).bits;
}
float from_bits(AttentionDType dt, uint16_t b) {
  return dt == AttentionDType::kBF16 ? bf16_to_float(bf16{b}) : f16_to_float(f16{b});
}

struct CublasHandle {
  cublasHandle_t h = nullptr;
  CublasHandle() { CUBLAS_CHECK(cublasCreate(&h)); }
  ~CublasHandle() { cublasDestroy(h); }
};

// One case on the device, in the layout training uses: q, k, v are strided views of a fused
// (B, T, 3, H, D) qkv buffer, dq, dk, dv of a fused dqkv buffer, o and dout contiguous.
class DeviceAttention {
 public:
  DeviceAttention(const AttentionParams& cfg, const AttentionInputs& in)
      : p_(cfg),
        n_(static_cast<size_t>(cfg.B) * cfg.T * cfg.H * cfg.D),
        rows_(static_cast<size_t>(cfg.B) * cfg.H * cfg.T),
        qkv_(3 * n_), dqkv_(3 * n_), o_(n_), dout_(n_), lse_(rows_), dsum_(rows_),
        // fp32 / fixed-point dQ, or the stored dS (whichever form a test forces)
        dq_accum_(static_cast<size_t>(std::max(cuda::flash_attention_backward_workspace(cfg).dq_accum_floats,
                                               cuda::flash_attention_backward_workspace(cfg).ds_floats))),
        dq_semaphore_(static_cast<size_t>(cuda::flash_attention_backward_workspace(cfg).dq_semaphore_ints)) {
    const int H = cfg.H, D = cfg.D, T = cfg.T;
    std::vector<uint16_t> qkv(3 * n_), dout(n_);
    for (int b = 0; b < cfg.B; ++b)
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) {
            const size_t src = ((static_cast<size_t>(b) * T + t) * H + h) * D + d;
            const size_t dst = ((static_cast<size_t>(b) * T + t) * 3 * H + h) * D + d;
            qkv[dst] = to_bits(cfg.dtype, in.q[src]);
            qkv[dst + H * D] = to_bits(cfg.dtype, in.k[src]);
            qkv[dst + 2 * H * D] = to_bits(cfg.dtype, in.v[src]);
            dout[src] = to_bits(cfg.dtype, in.dout[src]);
          }
    CUDA_CHECK(cudaMemcpy(qkv_.ptr, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dout_.ptr, dout.data(), dout.size() * 2, cudaMemcpyHostToDevice));
    const int64_t fused_row = 3 * H * D, fused_batch = fused_row * T;
    const BthdStrides c = contiguous_bthd_strides(T, H, D);
    p_.q = qkv_.ptr, p_.k = qkv_.ptr + H * D, p_.v = qkv_.ptr + 2 * H * D;
    p_.dq = dqkv_.ptr, p_.dk = dqkv_.ptr + H * D, p_.dv = dqkv_.ptr + 2 * H * D;
    for (int64_t* s : {&p_.q_batch_stride, &p_.k_batch_stride, &p_.v_batch_stride,
                       &p_.dq_batch_stride, &p_.dk_batch_stride, &p_.dv_batch_stride})
      *s = fused_batch;
    for (int64_t* s : {&p_.q_row_stride, &p_.k_row_stride, &p_.v_row_stride, &p_.dq_row_stride,
                       &p_.dk_row_stride, &p_.dv_row_stride})
      *s = fused_row;
    for (int64_t* s : {&p_.q_head_stride, &p_.k_head_stride, &p_.v_head_stride,
                       &p_.dq_head_stride, &p_.dk_head_stride, &p_.dv_head_stride})
      *s = D;
    p_.o = o_.ptr, p_.dout = dout_.ptr;
    p_.o_batch_stride = p_.do_batch_stride = c.batch;
    p_.o_row_stride = p_.do_row_stride = c.row;
    p_.o_head_stride = p_.do_head_stride = c.head;
    p_.lse = lse_.ptr, p_.dsum = dsum_.ptr, p_.dq_accum = dq_accum_.ptr;
  }

  AttentionParams& params() { return p_; }

  // deterministic: the fixed-order dQ backward (its counters poisoned first: the launch zeroes them).
  // The counters go with every call: one that does not ask may take the ordered dQ anyway
  // (flash_backward_deterministic).
  Outputs run_flash(bool deterministic = false) {
    poison();
    CUDA_CHECK(cudaMemset(dq_semaphore_.ptr, 0x5A, dq_semaphore_.n * sizeof(int)));
    cuda::flash_attention_forward(p_, nullptr);
    CUDA_CHECK_LAUNCH();
    cuda::flash_attention_backward(p_, nullptr, {deterministic, dq_semaphore_.ptr});
    CUDA_CHECK(cudaDeviceSynchronize());
    return download();
  }

  Outputs run_naive(cublasHandle_t handle) {
    poison();
    const size_t mat = static_cast<size_t>(cuda::naive_attention_matrix_elements(p_));
    DeviceBuffer<float> scores(mat);
    DeviceBuffer<uint16_t> probs(mat), dropped(mat), ds(mat);
    const cuda::NaiveAttentionBuffers buf{scores.ptr, probs.ptr, dropped.ptr, ds.ptr};
    cuda::naive_attention_forward(p_, buf, handle, nullptr);
    cuda::naive_attention_backward(p_, buf, handle, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    return download();
  }

 private:
  // NaN-filled outputs: an element a kernel fails to write shows up as NaN. The dQ accumulator too
  // (NaN floats, -1 fixed-point words): each backward zeroes what it adds into, or stores first
  // (the ordered dQ's key block 0, ws_first_block_stores_dq), and reads nothing it did not write.
  void poison() {
    CUDA_CHECK(cudaMemset(o_.ptr, 0xFF, n_ * 2));
    CUDA_CHECK(cudaMemset(dqkv_.ptr, 0xFF, 3 * n_ * 2));
    CUDA_CHECK(cudaMemset(lse_.ptr, 0xFF, rows_ * 4));
    CUDA_CHECK(cudaMemset(dq_accum_.ptr, 0xFF, dq_accum_.n * sizeof(float)));
  }

  Outputs download() const {
    const int H = p_.H, D = p_.D, T = p_.T;
    std::vector<uint16_t> o(n_), dqkv(3 * n_);
    Outputs out{std::vector<float>(n_), std::vector<float>(rows_), std::vector<float>(n_),
                std::vector<float>(n_), std::vector<float>(n_)};
    CUDA_CHECK(cudaMemcpy(o.data(), o_.ptr, n_ * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(dqkv.data(), dqkv_.ptr, 3 * n_ * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out.lse.data(), lse_.ptr, rows_ * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n_; ++i) out.o[i] = from_bits(p_.dtype, o[i]);
    for (int b = 0; b < p_.B; ++b)
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) {
            const size_t dst = ((static_cast<size_t>(b) * T + t) * H + h) * D + d;
            const size_t src = ((static_cast<size_t>(b) * T + t) * 3 * H + h) * D + d;
            out.dq[dst] = from_bits(p_.dtype, dqkv[src]);
            out.dk[dst] = from_bits(p_.dtype, dqkv[src + H * D]);
            out.dv[dst] = from_bits(p_.dtype, dqkv[src + 2 * H * D]);
          }
    return out;
  }

  AttentionParams p_;
  size_t n_, rows_;
  DeviceBuffer<uint16_t> qkv_, dqkv_, o_, dout_;
  DeviceBuffer<float> lse_, dsum_, dq_accum_;
  DeviceBuffer<int> dq_semaphore_;
};

// For a scope, calls that do not ask for determinism take the atomic dQ everywhere: with a form forced
// (here the ordered dQ, which only deterministic calls then take) flash_backward_deterministic keeps
// them atomic, so the tests of the atomic kernels still reach the shapes where kAuto would not.
struct AtomicDqForced {
  cuda::ScopedFlashDeterministicDq form{cuda::FlashDeterministicDq::kOrdered};
};

void expect_within_twice_naive(const Outputs& flash, const Outputs& naive, const Reference& ref,
                               const std::string& name) {
  const char* names[] = {"o", "dq", "dk", "dv"};
  const std::vector<float>* f[] = {&flash.o, &flash.dq, &flash.dk, &flash.dv};
  const std::vector<float>* nv[] = {&naive.o, &naive.dq, &naive.dk, &naive.dv};
  const std::vector<double>* r[] = {&ref.o, &ref.dq, &ref.dk, &ref.dv};
  for (int i = 0; i < 4; ++i) {
    if (identically_zero(*r[i])) {  // T = 1: see attention_cpu_test
      EXPECT_LE(rms(*f[i]), 0.05) << name << " " << names[i];
      continue;
    }
    const double ef = rel_error(*f[i], *r[i]), en = rel_error(*nv[i], *r[i]);
    EXPECT_LE(ef, 2 * en + 1e-5) << name << " " << names[i] << ": flash " << ef << " naive " << en;
    ::testing::Test::RecordProperty(std::string(names[i]) + "_flash_err", std::to_string(ef));
    ::testing::Test::RecordProperty(std::string(names[i]) + "_naive_err", std::to_string(en));
  }
  EXPECT_LE(lse_error(flash.lse, ref.lse), 2e-3) << name << " lse (flash)";
  EXPECT_LE(lse_error(naive.lse, ref.lse), 2e-3) << name << " lse (naive)";
}

// One case on the device, flash (with the kernels the process-wide switches select) against the
// float64 reference, within twice the error of naive attention; `label` names the path in messages.
void expect_case_within_twice_naive(const AttentionCase& c, bool deterministic, const std::string& label) {
  const AttentionParams cfg = config_of(c, 777, 3);
  const AttentionInputs in = make_inputs(c, 100u + c.T + c.D);
  const Reference ref = reference_of(cfg, in);
  DeviceAttention dev(cfg, in);
  CublasHandle cublas;
  const Outputs flash = dev.run_flash(deterministic);
  const Outputs naive = dev.run_naive(cublas.h);
  expect_within_twice_naive(flash, naive, ref, case_name(c) + label);
}

// (case, deterministic backward)
class FlashCudaVsReference : public ::testing::TestWithParam<std::tuple<AttentionCase, bool>> {};

TEST_P(FlashCudaVsReference, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  const bool deterministic = std::get<1>(GetParam());
  expect_case_within_twice_naive(std::get<0>(GetParam()), deterministic, deterministic ? " deterministic" : "");
}

std::vector<AttentionCase> cuda_cases() {
  std::vector<AttentionCase> cases;
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f, 0.5f})
      for (int T : {1, 17, 64, 127, 1000, 2048})
        for (int D : {64, 128}) {
          const int B = T >= 2048 ? 1 : (T >= 1000 ? 2 : 2), H = T >= 1000 ? 1 : 3;
          cases.push_back({B, T >= 2048 ? 2 : H, T, D, causal, p});
        }
  for (float p : {0.f, 0.1f})
    for (int D : {64, 128}) cases.push_back({2, 2, 333, D, true, p, AttentionDType::kF16});
  // T > 2048 without dropout takes the forward's 128-row tile (flash_launch.cuh).
  cases.push_back({1, 1, 3000, 64, true, 0.f});
  cases.push_back({1, 1, 2500, 64, false, 0.f});
  // Block-sparse (flash skips tiles, naive masks elements): block sizes below, at and above the tiles.
  cases.push_back({1, 2, 1000, 64, true, 0.f, AttentionDType::kBF16, 64, 3, 1});
  cases.push_back({1, 2, 1000, 64, true, 0.1f, AttentionDType::kBF16, 32, 4, 2});
  cases.push_back({2, 1, 777, 128, true, 0.f, AttentionDType::kBF16, 128, 2, 1});
  cases.push_back({1, 2, 600, 64, false, 0.f, AttentionDType::kBF16, 16, 5, 3});
  cases.push_back({1, 1, 1024, 64, true, 0.5f, AttentionDType::kBF16, 256, 1, 1});
  // D = 256 (its own tiles: forward 128 x 32, backward 64 x 64, dQ kernel 128 x 32;
  // flash_launch.cuh), small T: partial tiles of every kernel, dropout, f16 and block-sparse.
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f, 0.5f})
      for (int T : {1, 17, 64, 127, 300}) cases.push_back({T > 127 ? 1 : 2, 2, T, 256, causal, p});
  for (float p : {0.f, 0.1f}) cases.push_back({2, 2, 200, 256, true, p, AttentionDType::kF16});
  cases.push_back({1, 2, 300, 256, true, 0.1f, AttentionDType::kBF16, 32, 4, 2});
  cases.push_back({1, 2, 300, 256, false, 0.f, AttentionDType::kBF16, 128, 1, 1});
  cases.push_back({1, 2, 290, 256, true, 0.f, AttentionDType::kF16, 64, 2, 1});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaVsReference,
                         ::testing::Combine(::testing::ValuesIn(cuda_cases()), ::testing::Bool()),
                         [](const auto& info) {
                           return case_name(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_det" : "_atomic");
                         });

// The D = 64 and 128 forwards' mma.sync kernels, which Hopper builds with 90a no longer take by
// default (they replace the wgmma forward there): the same cases, forward through them.
class FlashCudaMmaSyncForward : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void TearDown() override { ft::cuda::set_flash_wgmma_allowed(true); }
};

TEST_P(FlashCudaMmaSyncForward, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  ft::cuda::set_flash_wgmma_allowed(false);
  ASSERT_FALSE(ft::cuda::flash_wgmma_enabled());
  expect_case_within_twice_naive(GetParam(), false, " mma.sync");
}

// The cases of cuda_cases at head dim D (64 and 128 have wgmma forwards, 64 a wide backward).
std::vector<AttentionCase> cases_at_d(std::initializer_list<int> dims) {
  std::vector<AttentionCase> cases;
  for (const AttentionCase& c : cuda_cases())
    for (int D : dims)
      if (c.D == D) cases.push_back(c);
  return cases;
}
std::vector<AttentionCase> wgmma_forward_cases() { return cases_at_d({64, 128}); }

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaMmaSyncForward, ::testing::ValuesIn(wgmma_forward_cases()),
                         [](const auto& info) { return case_name(info.param); });

// Every D = 64 (or 128) case through a path the default dispatch takes only for some T: SetUp moves one of
// the dispatch's T thresholds (flash_attention.h) to kT, TearDown restores its defaults.
template <void (*kSetThreshold)(int), int kT>
class FlashCudaThresholdMoved : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override { kSetThreshold(kT); }
  void TearDown() override { kSetThreshold(-1); }
};

// The D = 64 and 128 wgmma forwards' two-warpgroup tile, which the default dispatch takes above
// T = 2048 (4096 with dropout) only, at every T.
using FlashCudaWgmmaLargeTileForward = FlashCudaThresholdMoved<ft::cuda::set_flash_fwd_small_tile_max_t, 0>;

TEST_P(FlashCudaWgmmaLargeTileForward, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  expect_case_within_twice_naive(GetParam(), false, " two-warpgroup forward");
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaWgmmaLargeTileForward, ::testing::ValuesIn(wgmma_forward_cases()),
                         [](const auto& info) { return case_name(info.param); });

// The D = 64 and 128 backwards' wide-tile kernels, which the default dispatch takes from T = 2048 or
// 4096 on (flash_bwd_wide_min_t) where the warp-specialised backward does not (no sm_90a, document
// masks), at every T with that one off: the same cases, atomic dQ.
class FlashCudaWideBackward : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    ft::cuda::set_flash_bwd_wide_min_t(1);
    ft::cuda::set_flash_bwd_ws_min_t(INT_MAX);
  }
  void TearDown() override {
    ft::cuda::set_flash_bwd_wide_min_t(-1);
    ft::cuda::set_flash_bwd_ws_min_t(-1);
  }
};

TEST_P(FlashCudaWideBackward, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  expect_case_within_twice_naive(GetParam(), false, " wide backward");
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaWideBackward, ::testing::ValuesIn(cases_at_d({64, 128})),
                         [](const auto& info) { return case_name(info.param); });

// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh), which the default dispatch takes
// from T = 1024 on (flash_bwd_ws_min_t), from T = 0 on: the D = 64 and 128 cases (dropout included;
// the same Philox mask as naive's), atomic dQ. Without an sm_90a build and GPU every case takes the usual
// kernels; FlashCuda.WsBackwardTakesItsCalls checks which calls it takes.
using FlashCudaWsBackward = FlashCudaThresholdMoved<ft::cuda::set_flash_bwd_ws_min_t, 0>;

TEST_P(FlashCudaWsBackward, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  const AtomicDqForced atomic;
  expect_case_within_twice_naive(GetParam(), false, " warp-specialised backward");
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaWsBackward, ::testing::ValuesIn(cases_at_d({64, 128})),
                         [](const auto& info) { return case_name(info.param); });

// The warp-specialised Hopper forward (flash_fwd_ws_kernel.cuh; by default from T = 1024 at D = 128
// and T = 2048 at D = 64, flash_fwd_ws_min_t) from T = 0 on, in the dispatch's form at each head dim
// (flash_fwd_ws_form: at D = 128 two consumers with the overlap and ping-pong, at D = 64 three
// consumers, 192 rows, with the overlap), one CTA a query block (what the dispatch takes for long
// blocks, causal above T = 8192; the persistent form below has its own cases): the D = 64 and 128
// cases; those with dropout (not built) take the shipped forwards, as does every case without an
// sm_90a build and GPU. FlashCuda.WsForwardTakesItsCalls checks which calls it takes.
class FlashCudaWsForward : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    ft::cuda::set_flash_fwd_ws_min_t(0);
    ft::cuda::set_flash_fwd_ws_persistent(0);
  }
  void TearDown() override {
    ft::cuda::set_flash_fwd_ws_min_t(-1);
    ft::cuda::set_flash_fwd_ws_persistent(-1);
  }
};

TEST_P(FlashCudaWsForward, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  expect_case_within_twice_naive(GetParam(), false, " warp-specialised forward");
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaWsForward, ::testing::ValuesIn(cases_at_d({64, 128})),
                         [](const auto& info) { return case_name(info.param); });

// The same forward in its persistent form (kPersistent: a CTA takes query blocks from a counter, Q in
// two buffers, the K / V ring's count running on across blocks, the ping-pong's turns restarted per
// block), its grid capped at 3 CTAs so that every CTA of every case walks several blocks: ring
// phases, Q buffer reuse and turns across block boundaries, blocks of different lengths (causal,
// block-sparse, partial last blocks) one after another.
class FlashCudaWsForwardPersistent : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    ft::cuda::set_flash_fwd_ws_min_t(0);
    ft::cuda::set_flash_fwd_ws_persistent(1);
    ft::cuda::set_flash_fwd_ws_persistent_ctas_cap(3);
  }
  void TearDown() override {
    ft::cuda::set_flash_fwd_ws_min_t(-1);
    ft::cuda::set_flash_fwd_ws_persistent(-1);
    ft::cuda::set_flash_fwd_ws_persistent_ctas_cap(0);
  }
};

TEST_P(FlashCudaWsForwardPersistent, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  expect_case_within_twice_naive(GetParam(), false, " persistent warp-specialised forward");
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashCudaWsForwardPersistent, ::testing::ValuesIn(cases_at_d({64, 128})),
                         [](const auto& info) { return case_name(info.param); });

// And with its full grid (one CTA per SM) on more blocks than SMs: 192 blocks at D = 128, 144 at 64.
TEST(FlashCudaWsForwardPersistentFullGrid, WithinTwiceNaiveError) {
  SKIP_WITHOUT_CUDA();
  ft::cuda::set_flash_fwd_ws_min_t(0);
  ft::cuda::set_flash_fwd_ws_persistent(1);
  for (int D : {64, 128}) expect_case_within_twice_naive({2, 12, 1024, D, true, 0.f}, false, " persistent, full grid");
  ft::cuda::set_flash_fwd_ws_min_t(-1);
  ft::cuda::set_flash_fwd_ws_persistent(-1);
}

// Host only: the warp-specialised forward's threshold is 1024 at D = 128 and 2048 at D = 64 until set
// (the test process has no FLASHTRAIN_FLASH_FWD_WS_MIN_T); a set value holds at both head dims, and
// -1 restores the defaults.
TEST(FlashCudaDispatch, WsForwardThreshold) {
  if (std::getenv("FLASHTRAIN_FLASH_FWD_WS_MIN_T") != nullptr) GTEST_SKIP() << "FLASHTRAIN_FLASH_FWD_WS_MIN_T is set";
  EXPECT_EQ(ft::cuda::flash_fwd_ws_min_t(64), 2048);
  EXPECT_EQ(ft::cuda::flash_fwd_ws_min_t(128), 1024);
  ft::cuda::set_flash_fwd_ws_min_t(0);
  EXPECT_EQ(ft::cuda::flash_fwd_ws_min_t(64), 0);
  EXPECT_EQ(ft::cuda::flash_fwd_ws_min_t(128), 0);
  ft::cuda::set_flash_fwd_ws_min_t(-1);
  EXPECT_EQ(ft::cuda::flash_fwd_ws_min_t(64), 2048);
  EXPECT_EQ(ft::cuda::flash_fwd_ws_min_t(128), 1024);
}

// Host only: that forward runs persistent causal up to T = 8192 and non-causal up to 4096 until set;
// 1 and 0 hold at every T, and -1 restores the default.
TEST(FlashCudaDispatch, WsForwardPersistentUpTo32KeyTiles) {
  if (std::getenv("FLASHTRAIN_FLASH_FWD_WS_PERSISTENT_MAX_KEYS") != nullptr)
    GTEST_SKIP() << "FLASHTRAIN_FLASH_FWD_WS_PERSISTENT_MAX_KEYS is set";
  EXPECT_TRUE(ft::cuda::flash_fwd_ws_persistent(1024, true));
  EXPECT_TRUE(ft::cuda::flash_fwd_ws_persistent(8192, true));
  EXPECT_FALSE(ft::cuda::flash_fwd_ws_persistent(16384, true));
  EXPECT_TRUE(ft::cuda::flash_fwd_ws_persistent(4096, false));
  EXPECT_FALSE(ft::cuda::flash_fwd_ws_persistent(8192, false));
  ft::cuda::set_flash_fwd_ws_persistent(0);
  EXPECT_FALSE(ft::cuda::flash_fwd_ws_persistent(1024, true));
  ft::cuda::set_flash_fwd_ws_persistent(1);
  EXPECT_TRUE(ft::cuda::flash_fwd_ws_persistent(16384, true));
  EXPECT_TRUE(ft::cuda::flash_fwd_ws_persistent(16384, false));
  ft::cuda::set_flash_fwd_ws_persistent(-1);
  EXPECT_TRUE(ft::cuda::flash_fwd_ws_persistent(2048, true));
  EXPECT_FALSE(ft::cuda::flash_fwd_ws_persistent(16384, true));
}

// Host only: the warp-specialised backward's threshold is 1024 until set (the test process has no
// FLASHTRAIN_FLASH_BWD_WS_MIN_T), and -1 restores that.
TEST(FlashCudaDispatch, WsBackwardThreshold) {
  if (std::getenv("FLASHTRAIN_FLASH_BWD_WS_MIN_T") != nullptr) GTEST_SKIP() << "FLASHTRAIN_FLASH_BWD_WS_MIN_T is set";
  EXPECT_EQ(ft::cuda::flash_bwd_ws_min_t(), 1024);
  ft::cuda::set_flash_bwd_ws_min_t(0);
  EXPECT_EQ(ft::cuda::flash_bwd_ws_min_t(), 0);
  ft::cuda::set_flash_bwd_ws_min_t(-1);
  EXPECT_EQ(ft::cuda::flash_bwd_ws_min_t(), 1024);
}

// Host only: the wide backward's measured thresholds per head dim, one override for both, and -1
// restoring them.
TEST(FlashCudaDispatch, WideBackwardThresholds) {
  const auto expect_defaults = [] {
    EXPECT_EQ(ft::cuda::flash_bwd_wide_min_t(64, false), 2048);
    EXPECT_EQ(ft::cuda::flash_bwd_wide_min_t(64, true), 4096);
    EXPECT_EQ(ft::cuda::flash_bwd_wide_min_t(128, false), 4096);
    EXPECT_EQ(ft::cuda::flash_bwd_wide_min_t(128, true), 2048);
  };
  expect_defaults();
  ft::cuda::set_flash_bwd_wide_min_t(300);
  for (int d : {64, 128})
    for (bool dropout : {false, true}) EXPECT_EQ(ft::cuda::flash_bwd_wide_min_t(d, dropout), 300);
  ft::cuda::set_flash_bwd_wide_min_t(-1);
  expect_defaults();
}

// A Hopper build (90a) on a compute-capability-9.0 GPU runs the wgmma forward, so the cases above
// (FlashCudaVsReference) test it there and FlashCudaMmaSyncForward tests the other path.
TEST(FlashCuda, WgmmaForwardOnHopper) {
  SKIP_WITHOUT_CUDA();
  int device = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
#ifdef FT_FLASH_WGMMA
  EXPECT_EQ(ft::cuda::flash_wgmma_enabled(), major == 9 && minor == 0);
#else
  GTEST_SKIP() << "built without sm_90a code (CMAKE_CUDA_ARCHITECTURES has no 90a)";
#endif
}

// Flash and naive draw identical dropout masks: with the same (seed, offset) they agree to rounding,
// with another seed they do not.
void expect_same_mask_as_naive(int D) {
  const AttentionCase c{2, 3, 300, D, true, 0.5f};
  const AttentionInputs in = make_inputs(c, 11);
  CublasHandle cublas;
  DeviceAttention same(config_of(c, 99, 5), in), other(config_of(c, 100, 5), in);
  const Outputs f = same.run_flash(), n = same.run_naive(cublas.h), n_other = other.run_naive(cublas.h);
  double same_diff = 0, other_diff = 0;
  for (size_t i = 0; i < f.o.size(); ++i) {
    same_diff = std::max<double>(same_diff, std::abs(f.o[i] - n.o[i]));
    other_diff = std::max<double>(other_diff, std::abs(f.o[i] - n_other.o[i]));
  }
  // Same (seed, offset): equal up to bf16 rounding of O (|O| < ~2: one ulp ~ 0.008).
  EXPECT_LT(same_diff, 0.03) << "D " << D;
  EXPECT_GT(other_diff, 10 * same_diff) << "D " << D;
}

TEST(FlashCuda, SameMaskAsNaive) {
  SKIP_WITHOUT_CUDA();
  expect_same_mask_as_naive(64);
}

TEST(FlashCuda, DroppedFractionWithinBinomialTolerance) {
  SKIP_WITHOUT_CUDA();
  // V = identity (T = D = 64): O[i][j] = P o Z [i][j], so zeros of O are the dropped elements.
  for (float p : {0.1f, 0.5f}) {
    const AttentionCase c{4, 8, 64, 64, false, p};
    AttentionInputs in = make_inputs(c, 21);
    for (int b = 0; b < c.B; ++b)
      for (int t = 0; t < c.T; ++t)
        for (int h = 0; h < c.H; ++h)
          for (int d = 0; d < c.D; ++d)
            in.v[((static_cast<size_t>(b) * c.T + t) * c.H + h) * c.D + d] = t == d ? 1.f : 0.f;
    DeviceAttention dev(config_of(c, 2024, 0), in);
    const Outputs f = dev.run_flash();
    size_t dropped = 0;
    for (float x : f.o) dropped += x == 0.f;
    const double n = static_cast<double>(f.o.size());
    EXPECT_NEAR(dropped / n, p, 5 * std::sqrt(p * (1 - p) / n)) << "p " << p;
  }
}

// Scores that grow along the keys (k scaled by 1 + 3 t / T, rounded to the dtype again): a row's
// running maximum rises past its reference by more than 2^8 several times (the forward with dropout
// rescales O only then, kLazyRescale in flash_fwd_wgmma_kernel.cuh) and by less in between, where
// tiles are summed against a stale maximum. Within twice naive's error, as every case.
TEST(FlashCuda, ScoresGrowingAlongTheKeys) {
  SKIP_WITHOUT_CUDA();
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f}) {
      const AttentionCase c{1, 2, 1000, 64, causal, p};
      AttentionInputs in = make_inputs(c, 55);
      for (int t = 0; t < c.T; ++t)
        for (int i = 0; i < c.H * c.D; ++i) {
          float& x = in.k[static_cast<size_t>(t) * c.H * c.D + i];
          x = from_bits(c.dtype, to_bits(c.dtype, x * (1.f + 3.f * t / c.T)));
        }
      const AttentionParams cfg = config_of(c, 777, 3);
      const Reference ref = reference_of(cfg, in);
      DeviceAttention dev(cfg, in);
      CublasHandle cublas;
      const Outputs flash = dev.run_flash();
      const Outputs naive = dev.run_naive(cublas.h);
      expect_within_twice_naive(flash, naive, ref, case_name(c) + " growing scores");
    }
}

// Block-sparse with no window and no global block: no query sees any key.
void expect_fully_masked_rows_give_zeros(int D, bool deterministic) {
  const AttentionCase c{1, 2, 200, D, false, 0.1f, AttentionDType::kBF16, 16, 0, 0};
  DeviceAttention dev(config_of(c), make_inputs(c, 3));
  const Outputs f = dev.run_flash(deterministic);
  for (float x : f.o) ASSERT_EQ(x, 0.f);
  for (float x : f.lse) ASSERT_TRUE(std::isinf(x) && x < 0);
  for (const auto* g : {&f.dq, &f.dk, &f.dv})
    for (float x : *g) ASSERT_EQ(x, 0.f);
}

TEST(FlashCuda, FullyMaskedRowsGiveZerosNotNaN) {
  SKIP_WITHOUT_CUDA();
  expect_fully_masked_rows_give_zeros(64, false);
}

TEST(FlashCuda, DkDvBitReproducibleDqSpreadSmall) {
  SKIP_WITHOUT_CUDA();
  const AttentionCase c{2, 4, 1000, 64, true, 0.1f};
  DeviceAttention dev(config_of(c), make_inputs(c, 8));
  const AtomicDqForced atomic;  // kAuto would take the ordered dQ here on Hopper
  const Outputs a = dev.run_flash(), b = dev.run_flash();
  EXPECT_EQ(0, std::memcmp(a.dk.data(), b.dk.data(), a.dk.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dv.data(), b.dv.data(), a.dv.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * 4));
  double max_diff = 0, max_abs = 0;
  size_t differing = 0;
  for (size_t i = 0; i < a.dq.size(); ++i) {
    max_diff = std::max<double>(max_diff, std::abs(a.dq[i] - b.dq[i]));
    max_abs = std::max<double>(max_abs, std::abs(a.dq[i]));
    differing += a.dq[i] != b.dq[i];
  }
  RecordProperty("dq_max_run_to_run_diff", std::to_string(max_diff));
  RecordProperty("dq_elements_differing", std::to_string(differing));
  std::printf("dq run-to-run: %zu of %zu elements differ, max |diff| %.3g (max |dq| %.3g)\n",
              differing, a.dq.size(), max_diff, max_abs);
  EXPECT_LE(max_diff, 0.01 * max_abs);  // fp32 atomics reorder; the bf16 result moves <= 1 ulp
}

TEST(FlashCuda, WorkspaceLinearInT) {
  SKIP_WITHOUT_CUDA();
  // Every byte flash touches is a caller buffer whose size is linear in T (q, k, v, o, dout, dq,
  // dk, dv, lse, dsum, dq_accum); the launcher asks for no T x T workspace. The end-to-end check,
  // through the caching allocator's peak, is AttentionMemoryCuda in attention_memory_test.cpp.
  // (Device free memory is not compared here: cudaMemGetInfo counts every process on the GPU, so
  // parallel test processes made such a check flaky.)
  std::vector<double> bytes;
  for (int T : {1024, 4096, 16384}) {
    const AttentionCase c{1, 12, T, 64, true, 0.1f};
    const AttentionParams cfg = config_of(c);
    AttentionInputs in;
    const size_t n = static_cast<size_t>(T) * 12 * 64;
    in.q = in.k = in.v = in.dout = random_values(n, T, 1.f, c.dtype);
    DeviceAttention dev(cfg, in);
    dev.run_flash();
    const auto ws = cuda::flash_attention_backward_workspace(dev.params());
    // dq_accum's fixed-point form ends in one flag int per (batch, head): the only part not in T.
    const int64_t flags = cuda::flash::dq_fixed_float_count(12, T, 64) - 2 * cuda::flash::dq_accum_float_count(12, T, 64);
    bytes.push_back(static_cast<double>(n) * 2 * 8 +
                    (ws.dsum_floats + ws.dq_accum_floats - flags + ws.dq_semaphore_ints + T * 12) * 4.0);
    std::printf("T %d: flash fwd+bwd buffers %.1f MiB\n", T, bytes.back() / 1048576.0);
  }
  EXPECT_NEAR(bytes[1] / bytes[0], 4.0, 1e-9);
  EXPECT_NEAR(bytes[2] / bytes[0], 16.0, 1e-9);
}


bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max |x - y| over max |x|: how far two sums of the same terms in other orders are apart.
double relative_max_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    max_diff = std::max<double>(max_diff, std::abs(x[i] - y[i]));
    max_abs = std::max<double>(max_abs, std::abs(x[i]));
  }
  return max_diff / std::max(max_abs, 1e-30);
}

// Deterministic mode: repeated backward passes on the same inputs give the same bits in every
// gradient (three runs, so one lucky pair of atomic orders cannot pass); and its dq equals the
// atomic path's to rounding (the same sum in another order). dk and dv keep the atomic path's bits,
// except in the warp-specialised backward's ordered dQ, which sums them in another order too
// (flash_ws_ordered_dq): to rounding there.
void expect_deterministic_backward_bit_identical(const std::vector<AttentionCase>& cases) {
  size_t atomic_differs = 0;
  double worst = 0;
  for (const AttentionCase& c : cases) {
    DeviceAttention dev(config_of(c, 4321, 9), make_inputs(c, 500u + c.T + c.D));
    const Outputs a = dev.run_flash(true), b = dev.run_flash(true), d = dev.run_flash(true);
    const Outputs atomic = dev.run_flash(false);
    const std::string name = case_name(c);
    EXPECT_TRUE(same_bits(a.dq, b.dq) && same_bits(a.dq, d.dq)) << name << " dq";
    EXPECT_TRUE(same_bits(a.dk, b.dk) && same_bits(a.dk, d.dk)) << name << " dk";
    EXPECT_TRUE(same_bits(a.dv, b.dv) && same_bits(a.dv, d.dv)) << name << " dv";
    EXPECT_TRUE(same_bits(a.o, atomic.o)) << name << ": the forward does not depend on the mode";
    if (cuda::flash_ws_ordered_dq(dev.params())) {
      EXPECT_LE(relative_max_diff(a.dk, atomic.dk), 0.01) << name << " dk, ordered vs atomic";
      EXPECT_LE(relative_max_diff(a.dv, atomic.dv), 0.01) << name << " dv, ordered vs atomic";
    } else {
      EXPECT_TRUE(same_bits(a.dk, atomic.dk) && same_bits(a.dv, atomic.dv)) << name << ": only dq may depend on the mode";
    }
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < a.dq.size(); ++i) {
      max_diff = std::max<double>(max_diff, std::abs(a.dq[i] - atomic.dq[i]));
      max_abs = std::max<double>(max_abs, std::abs(a.dq[i]));
    }
    EXPECT_LE(max_diff, 0.01 * max_abs + 1e-6) << name << " dq deterministic vs atomic";
    atomic_differs += !same_bits(a.dq, atomic.dq);
    worst = std::max(worst, max_diff / std::max(max_abs, 1e-30));
  }
  std::printf("deterministic dq differs from the atomic path's bits in %zu of %zu cases; max |diff| / max |dq| %.3g\n",
              atomic_differs, cases.size(), worst);
}

// Runs f() with the deterministic backward's dQ made one way (flash_deterministic_dq).
template <class F>
void with_deterministic_dq(cuda::FlashDeterministicDq how, F&& f) {
  const cuda::ScopedFlashDeterministicDq form(how);
  f();
}
// kAuto (the default) picks one of the two per call; the tests force each.
constexpr cuda::FlashDeterministicDq kBothDeterministicDq[] = {cuda::FlashDeterministicDq::kFixedPoint,
                                                               cuda::FlashDeterministicDq::kOrdered};
const char* dq_name(cuda::FlashDeterministicDq how) {
  return how == cuda::FlashDeterministicDq::kFixedPoint ? "fixed-point dq" : "ordered dq";
}

// Over the grid of the issue, both deterministic forms.
TEST(FlashCuda, DeterministicBackwardIsBitIdentical) {
  SKIP_WITHOUT_CUDA();
  std::vector<AttentionCase> cases;
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f})
      for (int T : {17, 1000, 2048})
        for (int D : {64, 128}) cases.push_back({T >= 2048 ? 1 : 2, T >= 1000 ? 4 : 3, T, D, causal, p});
  cases.push_back({1, 2, 1000, 64, true, 0.1f, AttentionDType::kBF16, 32, 4, 2});   // block-sparse
  cases.push_back({2, 2, 333, 128, false, 0.1f, AttentionDType::kF16, 64, 2, 1});  // f16, sparse
  // T >= 2048 at D = 64 takes the wide-tile backward with the fixed-point dQ.
  cases.push_back({1, 2, 4100, 64, true, 0.1f});
  cases.push_back({1, 2, 2300, 64, false, 0.f});
  for (auto how : kBothDeterministicDq) {
    SCOPED_TRACE(dq_name(how));
    with_deterministic_dq(how, [&] { expect_deterministic_backward_bit_identical(cases); });
  }
}

// The fixed-point dQ's range (flash_attention.h): a head whose dQ contributions reach the bound comes
// out NaN, every other head as the atomic backward gives it (to rounding), and dK, dV are unchanged.
// Both the backward T = 256 takes by default and the warp-specialised one, whose range check sits in
// the consumer that sums dQ (kSummed) or, at D = 64 with dropout, in the producer's converter warps.
TEST(FlashCuda, FixedPointDqOutOfRangeGivesNaNForThatHeadOnly) {
  SKIP_WITHOUT_CUDA();
  struct Run {
    int ws_min_t, D;
    float p;
  };
  const Run runs[] = {{-1, 64, 0.f}, {-1, 128, 0.f}, {0, 64, 0.f}, {0, 128, 0.f}, {0, 64, 0.1f}};
  for (const auto& [ws_min_t, D, p] : runs) {
    SCOPED_TRACE(std::string(ws_min_t == 0 ? "warp-specialised" : "default") + " backward, p " + std::to_string(p));
    cuda::set_flash_bwd_ws_min_t(ws_min_t);
    const AttentionCase c{1, 2, 256, D, true, p};
    AttentionInputs in = make_inputs(c, 4242u + D);
    // Head 1's upstream gradient x 1e8: its contributions to dQ reach ~1e8, far past 2^23 / 4 key blocks.
    for (int t = 0; t < c.T; ++t)
      for (int d = 0; d < D; ++d) in.dout[(static_cast<size_t>(t) * c.H + 1) * D + d] *= 1e8f;
    DeviceAttention dev(config_of(c), in);
    Outputs fixed;
    with_deterministic_dq(cuda::FlashDeterministicDq::kFixedPoint, [&] { fixed = dev.run_flash(true); });
    Outputs atomic;
    {
      const AtomicDqForced forced;  // kAuto would take the ordered dQ at D = 64 with dropout
      atomic = dev.run_flash(false);
    }
    size_t nan_head1 = 0, bad_head0 = 0;
    for (int t = 0; t < c.T; ++t)
      for (int d = 0; d < D; ++d) {
        const size_t i0 = (static_cast<size_t>(t) * c.H) * D + d, i1 = i0 + D;
        nan_head1 += std::isnan(fixed.dq[i1]);
        bad_head0 += !(std::abs(fixed.dq[i0] - atomic.dq[i0]) <= 0.02f * std::abs(atomic.dq[i0]) + 1e-3f);
        ASSERT_TRUE(std::isfinite(atomic.dq[i1])) << "the atomic path stays finite here";
      }
    EXPECT_EQ(nan_head1, static_cast<size_t>(c.T) * D) << "D " << D << ": head 1's dq must be all NaN";
    EXPECT_EQ(bad_head0, 0u) << "D " << D << ": head 0's dq must be the atomic path's";
    EXPECT_TRUE(same_bits(fixed.dk, atomic.dk) && same_bits(fixed.dv, atomic.dv)) << "D " << D;
  }
  cuda::set_flash_bwd_ws_min_t(-1);
}

// The D = 128 wide-tile backward (flash_bwd_wide_min_t moved to 1) with the fixed-point dQ, the
// only deterministic form it takes: bit-identical runs, and a few cases against the float64 reference.
TEST(FlashCuda, WideBackward128FixedPointDq) {
  SKIP_WITHOUT_CUDA();
  std::vector<AttentionCase> cases;
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f})
      for (int T : {17, 1000}) cases.push_back({2, T >= 1000 ? 2 : 3, T, 128, causal, p});
  cases.push_back({2, 2, 333, 128, true, 0.1f, AttentionDType::kF16});
  cases.push_back({2, 1, 777, 128, true, 0.f, AttentionDType::kBF16, 128, 2, 1});  // block-sparse
  cuda::set_flash_bwd_wide_min_t(1);
  cuda::set_flash_bwd_ws_min_t(INT_MAX);  // it would go first
  with_deterministic_dq(cuda::FlashDeterministicDq::kFixedPoint, [&] {
    expect_deterministic_backward_bit_identical(cases);
    for (const AttentionCase& c : {cases[1], cases[7], cases[8], cases[9]})
      expect_case_within_twice_naive(c, true, " wide backward (D = 128), fixed-point dq");
  });
  cuda::set_flash_bwd_wide_min_t(-1);
  cuda::set_flash_bwd_ws_min_t(-1);
}

// Which calls the warp-specialised backward takes once its threshold allows: D = 64 with atomic or
// fixed-point dQ, D = 128 with atomic dQ, on an sm_90a build and GPU (TMA-describable strides: the fused qkv layout
// of training is); never at the default threshold.
TEST(FlashCuda, WsBackwardTakesItsCalls) {
  SKIP_WITHOUT_CUDA();
  if (std::getenv("FLASHTRAIN_FLASH_BWD_WS_MIN_T") != nullptr) GTEST_SKIP() << "FLASHTRAIN_FLASH_BWD_WS_MIN_T is set";
  const AttentionCase c{2, 3, 1000, 64, true, 0.f};
  DeviceAttention dev(config_of(c, 1, 1), make_inputs(c, 7));
  AttentionParams p = dev.params();
  const cuda::FlashBackwardMode atomic{false, nullptr}, det{true, nullptr};
  EXPECT_FALSE(cuda::flash::flash_bwd_ws_applies(p, atomic)) << "not by default";
  cuda::set_flash_bwd_ws_min_t(0);
  const bool hopper = cuda::flash_sm90a_device();
  EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(p, atomic), hopper);
  with_deterministic_dq(cuda::FlashDeterministicDq::kFixedPoint,
                        [&] { EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(p, det), hopper) << "fixed-point dq"; });
  with_deterministic_dq(cuda::FlashDeterministicDq::kOrdered, [&] {
    EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(p, det), hopper) << "ordered dq";
    EXPECT_EQ(cuda::flash_ws_ordered_dq(p), hopper) << "ordered dq";
  });
  AttentionParams dropout = p;
  dropout.dropout.threshold = 6554;
  EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(dropout, atomic), hopper) << "dropout";
  AttentionParams d128 = p;  // the strides of D = 64 still satisfy TMA's rules
  d128.D = 128;
  EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(d128, atomic), hopper) << "D = 128, atomic dq";
  with_deterministic_dq(cuda::FlashDeterministicDq::kFixedPoint, [&] {
    EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(d128, det), hopper) << "D = 128, fixed-point dq (one dQ buffer)";
  });
  with_deterministic_dq(cuda::FlashDeterministicDq::kOrdered, [&] {
    EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(d128, det), hopper) << "D = 128, ordered dq (dQ split by columns)";
    EXPECT_EQ(cuda::flash_ws_ordered_dq(d128), hopper) << "D = 128: the ws backward's ordered dq";
  });
  // The deterministic default (kAuto): the stored dS at D = 128 up to a 1 GiB workspace and the ordered
  // dQ beyond it (flash_stored_ds_dq); the ordered dQ at D = 64 (flash_ws_ordered_dq), the fixed
  // point where the warp-specialised backward does not run.
  with_deterministic_dq(cuda::FlashDeterministicDq::kAuto, [&] {
    EXPECT_EQ(cuda::flash_stored_ds_dq(d128), hopper) << "D = 128: the stored dS";
    EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(d128, det), hopper) << "D = 128, deterministic";
    EXPECT_FALSE(cuda::flash_stored_ds_dq(p)) << "D = 64: not the stored dS";
    EXPECT_EQ(cuda::flash_ws_ordered_dq(p), hopper) << "D = 64: the ordered dq";
    EXPECT_EQ(cuda::flash_fixed_point_dq(p), !hopper) << "D = 64: the fixed point without the ws backward";
    EXPECT_EQ(cuda::flash::flash_bwd_ws_applies(p, det), hopper) << "D = 64, deterministic";
    AttentionParams big = d128;
    big.B = 2000;  // 6000 heads x 72 tiles x 16 KiB: past the 1 GiB
    EXPECT_FALSE(cuda::flash_stored_ds_dq(big)) << "a workspace over 1 GiB: not the stored dS";
    EXPECT_EQ(cuda::flash_ws_ordered_dq(big), hopper) << "a workspace over 1 GiB: the ordered dq";
  });
  AttentionParams d256 = p;
  d256.D = 256;
  EXPECT_FALSE(cuda::flash::flash_bwd_ws_applies(d256, atomic)) << "D = 256 is not built";
  cuda::set_flash_bwd_ws_min_t(-1);
  EXPECT_FALSE(cuda::flash::flash_bwd_ws_applies(p, atomic)) << "the default restored";
}

// Which calls that do not ask for determinism take a deterministic form anyway, where kAuto's measured
// faster than the atomic dQ (flash_backward_deterministic): on Hopper with the warp-specialised
// backward, D = 128 (the stored dS where it fits, at any p; beyond it the ordered dQ with dropout
// only) and D = 64 with dropout up to T = 2048; none with a form forced, none elsewhere.
TEST(FlashCuda, UndeterministicCallsTakeTheFasterForm) {
  SKIP_WITHOUT_CUDA();
  if (std::getenv("FLASHTRAIN_FLASH_BWD_WS_MIN_T") != nullptr) GTEST_SKIP() << "FLASHTRAIN_FLASH_BWD_WS_MIN_T is set";
  if (std::getenv("FLASHTRAIN_DETERMINISTIC_DQ") != nullptr) GTEST_SKIP() << "FLASHTRAIN_DETERMINISTIC_DQ is set";
  const bool hopper = cuda::flash_sm90a_device();
  const AttentionCase c{2, 3, 1024, 64, true, 0.1f};
  DeviceAttention dev(config_of(c, 1, 1), make_inputs(c, 7));
  const AttentionParams d64 = dev.params();  // T = 1024: the ws backward's default range
  ASSERT_EQ(cuda::flash::flash_bwd_ws_runs_here(d64), hopper);
  AttentionParams d64_p0 = d64, d64_long = d64, d128 = d64, d128_p0 = d64;
  d64_p0.dropout.threshold = 0;
  d64_long.T = 4096;
  d128.D = d128_p0.D = 128;  // the strides of D = 64 still satisfy TMA's rules
  d128_p0.dropout.threshold = 0;
  AttentionParams d128_big = d128, d128_big_p0 = d128_p0;
  d128_big.B = d128_big_p0.B = 2000;  // past the stored dS's 1 GiB
  EXPECT_EQ(cuda::flash_backward_deterministic(d64, false), hopper) << "D = 64, T = 1024, dropout";
  EXPECT_FALSE(cuda::flash_backward_deterministic(d64_p0, false)) << "D = 64 without dropout";
  EXPECT_FALSE(cuda::flash_backward_deterministic(d64_long, false)) << "D = 64, T = 4096";
  EXPECT_EQ(cuda::flash_backward_deterministic(d128, false), hopper) << "D = 128, dropout";
  EXPECT_EQ(cuda::flash_backward_deterministic(d128_p0, false), hopper) << "D = 128 without dropout";
  EXPECT_EQ(cuda::flash_backward_deterministic(d128_big, false), hopper) << "D = 128 past the cap, dropout";
  EXPECT_FALSE(cuda::flash_backward_deterministic(d128_big_p0, false)) << "D = 128 past the cap, no dropout";
  for (const AttentionParams& q : {d64, d64_p0, d128_big_p0})
    EXPECT_TRUE(cuda::flash_backward_deterministic(q, true)) << "asked: always";
  // The workspaces follow the form: the stored dS's at D = 128, the ordered dQ's counters at D = 64.
  EXPECT_EQ(cuda::flash_backward_needs(d128, false).stored_ds, hopper);
  EXPECT_EQ(cuda::flash_backward_needs(d64, false).dq_semaphore, hopper);
  {
    const AtomicDqForced forced;
    EXPECT_FALSE(cuda::flash_backward_deterministic(d128, false)) << "a form forced";
    EXPECT_FALSE(cuda::flash_backward_deterministic(d64, false)) << "a form forced";
  }
  AttentionParams small = d128;
  small.T = 100;  // below the ws backward's threshold
  EXPECT_FALSE(cuda::flash_backward_deterministic(small, false)) << "where the ws backward does not run";
}

// Which calls the warp-specialised forward takes once its threshold allows: D = 64 and 128 without
// dropout, on an sm_90a build and GPU with wgmma allowed; at the default thresholds, D = 128 from
// T = 1024 on and D = 64 from T = 2048.
TEST(FlashCuda, WsForwardTakesItsCalls) {
  SKIP_WITHOUT_CUDA();
  if (std::getenv("FLASHTRAIN_FLASH_FWD_WS_MIN_T") != nullptr) GTEST_SKIP() << "FLASHTRAIN_FLASH_FWD_WS_MIN_T is set";
  const AttentionCase c{2, 3, 1000, 64, true, 0.f};
  DeviceAttention dev(config_of(c, 1, 1), make_inputs(c, 7));
  AttentionParams p = dev.params();
  const bool hopper = cuda::flash_sm90a_device();
  EXPECT_FALSE(cuda::flash::flash_fwd_ws_applies(p)) << "D = 64 below T = 2048";
  AttentionParams d64_long = p;
  d64_long.T = 2048;
  EXPECT_EQ(cuda::flash::flash_fwd_ws_applies(d64_long), hopper) << "D = 64 from T = 2048 by default";
  AttentionParams d128_long = p;  // D = 64's strides satisfy TMA's rules at D = 128 too
  d128_long.D = 128;
  EXPECT_FALSE(cuda::flash::flash_fwd_ws_applies(d128_long)) << "D = 128 below T = 1024";
  d128_long.T = 1024;
  EXPECT_EQ(cuda::flash::flash_fwd_ws_applies(d128_long), hopper) << "D = 128 from T = 1024 by default";
  cuda::set_flash_fwd_ws_min_t(0);
  EXPECT_EQ(cuda::flash::flash_fwd_ws_applies(p), hopper);
  AttentionParams d128 = p;  // the strides of D = 64 still satisfy TMA's rules
  d128.D = 128;
  EXPECT_EQ(cuda::flash::flash_fwd_ws_applies(d128), hopper) << "D = 128";
  AttentionParams dropout = p;
  dropout.dropout.threshold = 6554;
  EXPECT_FALSE(cuda::flash::flash_fwd_ws_applies(dropout)) << "dropout is not built";
  AttentionParams d256 = p;
  d256.D = 256;
  EXPECT_FALSE(cuda::flash::flash_fwd_ws_applies(d256)) << "D = 256 is not built";
  cuda::set_flash_wgmma_allowed(false);
  EXPECT_FALSE(cuda::flash::flash_fwd_ws_applies(p)) << "wgmma disallowed: the mma.sync forwards";
  cuda::set_flash_wgmma_allowed(true);
  cuda::set_flash_fwd_ws_min_t(-1);
  EXPECT_FALSE(cuda::flash::flash_fwd_ws_applies(p)) << "the default restored";
}

// The cases of the warp-specialised backward's deterministic forms: D = 64 causal or not, with and
// without dropout, T = 17, 130, 1000 (0-11); f16 (12); block-sparse (13); D = 128 (14, 15).
std::vector<AttentionCase> ws_backward_deterministic_cases() {
  std::vector<AttentionCase> cases;
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f})
      for (int T : {17, 130, 1000}) cases.push_back({2, T >= 1000 ? 2 : 3, T, 64, causal, p});
  cases.push_back({2, 2, 333, 64, true, 0.1f, AttentionDType::kF16});
  cases.push_back({1, 2, 1000, 64, true, 0.f, AttentionDType::kBF16, 64, 3, 1});  // block-sparse
  cases.push_back({2, 2, 1000, 128, true, 0.1f});
  cases.push_back({1, 2, 130, 128, false, 0.f, AttentionDType::kF16});
  return cases;
}

// The warp-specialised backward (at every T) in the deterministic form `how` on `cases`, each of which
// it must take (`takes`): bit-identical runs, dq, dk and dv as the atomic form's (flash_ws_ordered_dq
// says how close), and the cases at the indices `naive` within twice naive's error of float64.
void expect_ws_deterministic_form(cuda::FlashDeterministicDq how, bool (*takes)(const AttentionParams&),
                                  const std::string& form, const std::vector<AttentionCase>& cases,
                                  std::initializer_list<size_t> naive) {
  cuda::set_flash_bwd_ws_min_t(0);
  with_deterministic_dq(how, [&] {
    for (const AttentionCase& c : cases) {
      DeviceAttention dev(config_of(c), make_inputs(c, 1));
      EXPECT_TRUE(takes(dev.params())) << case_name(c) << ": the " << form << " takes the call";
    }
    expect_deterministic_backward_bit_identical(cases);
    for (size_t i : naive) expect_case_within_twice_naive(cases[i], true, " warp-specialised backward, " + form);
  });
  cuda::set_flash_bwd_ws_min_t(-1);
}

// The warp-specialised backward with the fixed-point dQ (bulk int64 adds): bit-identical runs, dK
// and dV equal to its atomic form's bits, dQ to rounding, and cases against the float64 reference.
// (D = 128 has one dQ buffer: two do not fit beside its tiles.)
TEST(FlashCuda, WsBackwardFixedPointDq) {
  SKIP_WITHOUT_CUDA();
  expect_ws_deterministic_form(cuda::FlashDeterministicDq::kFixedPoint, cuda::flash_fixed_point_dq, "fixed-point dq",
                               ws_backward_deterministic_cases(), {2, 5, 11, 12, 13, 14, 15});
}

// The warp-specialised backward with the ordered dQ (fp32 bulk adds in ascending key-block order,
// FlashAttention-3's way; at D = 128 with dQ split by columns between the consumers): it takes the
// calls; bit-identical runs, dq, dk and dv equal to the atomic form's to rounding, and cases against
// the float64 reference. Also with many key blocks a head (T = 4100: 33 of them, so blocks wait on
// the ones below them), B H large enough that the CTAs run in several waves (and, at D = 128 with
// dropout, the persistent form's CTAs walk several items), and D = 128 block-sparse.
TEST(FlashCuda, WsBackwardOrderedDq) {
  SKIP_WITHOUT_CUDA();
  if (!cuda::flash_sm90a_device()) GTEST_SKIP() << "the ordered dQ of the warp-specialised backward is built for sm_90a only";
  std::vector<AttentionCase> cases = ws_backward_deterministic_cases();  // D = 128: 14, 15
  cases.push_back({1, 2, 4100, 64, true, 0.1f});
  cases.push_back({1, 2, 4100, 64, false, 0.f});
  cases.push_back({24, 12, 1024, 64, true, 0.f});  // 2304 CTAs
  cases.push_back({1, 2, 4100, 128, true, 0.f});
  cases.push_back({1, 2, 2100, 128, false, 0.1f});
  cases.push_back({12, 12, 1024, 128, true, 0.1f});  // 1152 items on 132 SMs (persistent)
  cases.push_back({1, 2, 1000, 128, false, 0.f, AttentionDType::kBF16, 128, 2, 1});  // block-sparse
  expect_ws_deterministic_form(cuda::FlashDeterministicDq::kOrdered, cuda::flash_ws_ordered_dq, "ordered dq", cases,
                               {2, 5, 11, 12, 13, 14, 15, 22});
}

// The warp-specialised backward with the stored dS (flash_ds_store.cuh: dS written, then dQ = dS K
// summed in key order by a second kernel): bit-identical runs, dK and dV equal to the atomic form's
// bits, dQ to rounding, and cases against the float64 reference (twice naive's error). Causal and
// not (the causal layout keeps only the visible tiles), block-sparse (empty tiles skipped by both
// kernels), f16, T not a multiple of 64 or 128.
TEST(FlashCuda, WsBackwardStoredDs) {
  SKIP_WITHOUT_CUDA();
  if (!cuda::flash_sm90a_device()) GTEST_SKIP() << "the stored dS is built for sm_90a (H100 / H200) only";
  std::vector<AttentionCase> cases = ws_backward_deterministic_cases();
  cases.push_back({1, 3, 777, 128, true, 0.f});
  cases.push_back({1, 2, 1000, 128, false, 0.1f, AttentionDType::kBF16, 128, 2, 1});  // block-sparse
  expect_ws_deterministic_form(cuda::FlashDeterministicDq::kStoredDs, cuda::flash_stored_ds_dq, "stored dS", cases,
                               {2, 5, 8, 11, 12, 13, 14, 15, 16, 17});
}

// The stored dS's workspace: the causal layout's tile count against a direct count of the tiles a
// causal (64-query, 128-key) grid can see, and the non-causal one's full grid.
TEST(FlashCuda, StoredDsWorkspaceCountsVisibleTiles) {
  for (int T : {1, 17, 64, 65, 127, 128, 129, 1000, 1024, 4096, 4100}) {
    int64_t visible = 0;
    const int m_tiles = (T + 63) / 64, n_blocks = (T + 127) / 128;
    for (int m = 0; m < m_tiles; ++m)
      for (int n = 0; n < n_blocks; ++n) visible += 128 * n <= std::min(64 * m + 63, T - 1);
    EXPECT_EQ(cuda::flash::ds_tiles_per_head(T, true), visible) << "T " << T;
    EXPECT_EQ(cuda::flash::ds_tiles_per_head(T, false), static_cast<int64_t>(m_tiles) * n_blocks) << "T " << T;
    int64_t before = 0;  // tiles before each row: the running sum of the visible ones
    for (int m = 0; m < m_tiles; ++m) {
      EXPECT_EQ(cuda::flash::ds_tiles_before(m, T, true), before) << "T " << T << " m " << m;
      for (int n = 0; n < n_blocks; ++n) before += 128 * n <= std::min(64 * m + 63, T - 1);
    }
  }
}

// D = 256: the split backward without dropout, the wide tile's counter-ordered dQ with it.
TEST(FlashCudaHeadDim256, DeterministicBackwardIsBitIdentical) {
  SKIP_WITHOUT_CUDA();
  std::vector<AttentionCase> cases;
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f})
      for (int T : {17, 300}) cases.push_back({2, 2, T, 256, causal, p});
  cases.push_back({1, 2, 300, 256, true, 0.1f, AttentionDType::kF16, 32, 4, 2});  // f16, block-sparse
  for (auto how : kBothDeterministicDq) {
    SCOPED_TRACE(dq_name(how));
    with_deterministic_dq(how, [&] { expect_deterministic_backward_bit_identical(cases); });
  }
}

TEST(FlashCudaHeadDim256, SameMaskAsNaive) {
  SKIP_WITHOUT_CUDA();
  expect_same_mask_as_naive(256);
}

TEST(FlashCudaHeadDim256, FullyMaskedRowsGiveZerosNotNaN) {
  SKIP_WITHOUT_CUDA();
  for (bool deterministic : {false, true}) expect_fully_masked_rows_give_zeros(256, deterministic);
  with_deterministic_dq(cuda::FlashDeterministicDq::kOrdered, [] { expect_fully_masked_rows_give_zeros(256, true); });
}

// Graph replay (core/dropout_mask.h): offset_base pointing at a device word X with offset Y gives
// the same bits as offset X + Y, in the forward and in every gradient.
TEST(FlashCuda, DropoutOffsetBaseEqualsPlainOffset) {
  SKIP_WITHOUT_CUDA();
  for (int D : {64, 128, 256}) {
    const AttentionCase c{2, 3, 300, D, true, 0.1f};
    const AttentionInputs in = make_inputs(c, 77);
    const uint64_t X = 0x100000005ull, Y = 12;  // X above 2^32: the carry into the high word counts
    DeviceBuffer<uint64_t> base(1);
    CUDA_CHECK(cudaMemcpy(base.ptr, &X, sizeof(X), cudaMemcpyHostToDevice));
    DeviceAttention plain(config_of(c, 99, X + Y), in), based(config_of(c, 99, Y), in),
        unbased(config_of(c, 99, Y), in);
    based.params().dropout.offset_base = base.ptr;
    const Outputs a = plain.run_flash(true), b = based.run_flash(true), u = unbased.run_flash(true);
    EXPECT_TRUE(same_bits(a.o, b.o)) << "D " << D << " o";
    EXPECT_TRUE(same_bits(a.dq, b.dq)) << "D " << D << " dq";
    EXPECT_TRUE(same_bits(a.dk, b.dk)) << "D " << D << " dk";
    EXPECT_TRUE(same_bits(a.dv, b.dv)) << "D " << D << " dv";
    EXPECT_FALSE(same_bits(a.o, u.o)) << "D " << D << ": the base must matter";
  }
}

}  // namespace
}  // namespace ft
