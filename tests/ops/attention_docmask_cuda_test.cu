// The document mask on CUDA: document_starts equals the CPU scan; flash (with its tile skipping)
// and naive attention against a brute-force float64 attention whose mask comes from the tokens
// (tests/ops/docmask_test_util.h), flash within twice naive's error, for several documents per
// row, boundaries inside tiles, back-to-back eots and rows with no eot, dense and block-sparse,
// head dims 64 and 128 (and 256, f16, T > 2048: every document-mask instantiation of the kernels),
// through every flash kernel path (wgmma and mma.sync forwards, both wgmma tiles,
// the 4-warp and wide backwards, the dQ kernel and the ordered dQ); with dropout against the float64 CPU reference (which the CPU suite checks
// against the brute force); the deterministic backward stays bit-identical (and finishes: its dQ
// order counts only the key blocks the mask leaves).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/attention.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_launch_common.h"
#include "ops/document_mask.h"
#include "ops/elementwise.h"
#include "tests/ops/docmask_test_util.h"
#include "tests/test_util.h"

namespace ft::ops {
namespace {

using namespace testing_docmask;

TEST(DocMaskCuda, DocumentStartsEqualTheCpuScan) {
  FT_REQUIRE_CUDA();
  std::mt19937 gen(3);
  for (const int T : {1, 100, 1024, 4097}) {
    for (const double density : {0.0, 0.01, 0.3}) {
      const int B = 3;
      std::bernoulli_distribution eot(density);
      std::vector<int32_t> tok(static_cast<size_t>(B) * T);
      for (auto& t : tok) t = eot(gen) ? kEot : 17;
      const Tensor cpu = Tensor::from_vector(tok, {B, T});
      const Tensor ds = document_starts(cpu.to(Device::cuda(0)));
      EXPECT_EQ(ds.device(), Device::cuda(0));
      EXPECT_EQ(ds.to(Device::cpu()).to_vector<int32_t>(), document_starts(cpu).to_vector<int32_t>())
          << "T " << T << " density " << density;
    }
  }
}

struct Result {
  AttentionForward fwd;
  Tensor dqkv;  // (B, T, 3C)
};

// Forward and backward with q, k, v (and dq, dk, dv) slices of one (B, T, 3, H, D) buffer.
Result run(bool flash, const Tensor& qkv, const Tensor& dout, int B, int T, int H, int D, const AttentionOptions& o) {
  const Tensor parts = qkv.view({B, T, 3, H, D});
  const Tensor q = parts.select(2, 0), k = parts.select(2, 1), v = parts.select(2, 2);
  Result r;
  r.fwd = flash ? flash_attention_forward(q, k, v, o) : naive_attention_forward(q, k, v, o);
  r.dqkv = Tensor::full({B, T, 3 * H * D}, std::nan(""), qkv.dtype(), qkv.device());  // unwritten: NaN
  const Tensor g = r.dqkv.view({B, T, 3, H, D});
  if (flash)
    flash_attention_backward(q, k, v, r.fwd.out, r.fwd.lse, dout, o, g.select(2, 0), g.select(2, 1), g.select(2, 2));
  else
    naive_attention_backward(q, k, v, r.fwd, dout, o, g.select(2, 0), g.select(2, 1), g.select(2, 2));
  return r;
}

std::vector<double> part(const Tensor& dqkv, int which, int B, int T, int H, int D) {
  return dqkv.view({B, T, 3, H, D}).select(2, which).contiguous().to_doubles();
}

struct Expected {
  std::vector<double> o, dq, dk, dv;
};

// The flash kernel paths (ops/cuda/attention/flash_attention.h), set process-wide for one run.
struct FlashPath {
  const char* name;
  bool wgmma;
  int small_tile_max_t, wide_min_t;  // -1: the defaults
};
// The defaults at these T: the wgmma 64-row forward tile (D = 64 and 128) and the 4-warp backward.
constexpr FlashPath kPaths[] = {{"default", true, -1, -1},
                                {"mma.sync", false, -1, -1},
                                {"wgmma 128-row tile, wide bwd", true, 0, 1},
                                {"mma.sync, wide bwd", false, -1, 1}};
struct PathGuard {
  explicit PathGuard(const FlashPath& p) {
    cuda::set_flash_wgmma_allowed(p.wgmma);
    cuda::set_flash_fwd_small_tile_max_t(p.small_tile_max_t);
    cuda::set_flash_bwd_wide_min_t(p.wide_min_t);
  }
  ~PathGuard() {
    cuda::set_flash_wgmma_allowed(true);
    cuda::set_flash_fwd_small_tile_max_t(-1);
    cuda::set_flash_bwd_wide_min_t(-1);
  }
};

// One flash run `f` and the naive run `n` against `ref`: flash within twice naive's error (naive
// itself within bf16 noise, so a wrong mask in both cannot pass).
void expect_within_twice_naive(const Result& f, const Result& n, int B, int T, int H, int D, const Expected& ref,
                               const std::string& name) {
  const std::vector<double> fo = f.fwd.out.to_doubles(), no = n.fwd.out.to_doubles();  // (B, T, H, D)
  const std::vector<double>* fs[] = {&fo, nullptr, nullptr, nullptr};
  const std::vector<double>* ns[] = {&no, nullptr, nullptr, nullptr};
  std::vector<double> fg[3], ng[3];
  for (int i = 0; i < 3; ++i) {
    fg[i] = part(f.dqkv, i, B, T, H, D), ng[i] = part(n.dqkv, i, B, T, H, D);
    fs[i + 1] = &fg[i], ns[i + 1] = &ng[i];
  }
  const std::vector<double>* rs[] = {&ref.o, &ref.dq, &ref.dk, &ref.dv};
  const char* names[] = {"o", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) {
    const double ef = test::rel_error(*fs[i], *rs[i]), en = test::rel_error(*ns[i], *rs[i]);
    EXPECT_LE(en, 5e-2) << name << " " << names[i] << " naive against the reference";
    EXPECT_LE(ef, 2 * en + 1e-5) << name << " " << names[i] << ": flash " << ef << " naive " << en;
  }
}

// Flash through every kernel path, and naive, on the GPU in bf16 against `ref`.
void expect_flash_within_twice_naive(const Tensor& qkv, const Tensor& dout, int B, int T, int H, int D,
                                     const AttentionOptions& o, const Expected& ref, const std::string& name) {
  const Result n = run(false, qkv, dout, B, T, H, D, o);
  for (const FlashPath& path : kPaths) {
    const PathGuard guard(path);
    expect_within_twice_naive(run(true, qkv, dout, B, T, H, D, o), n, B, T, H, D, ref, name + " " + path.name);
  }
}

bool sparse_visible(int i, int j, int bs, int window, int global) {
  const int qb = i / bs, kb = j / bs;
  return (kb <= qb && kb > qb - window) || kb < global;
}

struct Case {
  int T, D, block_size;  // block_size > 0: block-sparse (window 2, global 1) under the document mask
  DType dtype = DType::BF16;
  int H = 2;
};

// Flash (every kernel path, both backward modes) and naive against the brute force on case c.
void expect_case_against_brute_force(const Case& c) {
  const int B = 3, H = c.H, T = c.T, D = c.D;
  // Row 0: documents from 0, 5, inside the second tile and near the end; row 1: no eot; row 2:
  // back-to-back eots, one document spanning tiles.
  const std::vector<int32_t> tok = tokens_with_eots(B, T, {{0, 5, 70, 150, T - 1}, {}, {1, 2, 17, 130, 131}});
  std::vector<bool> mask = brute_force_mask(tok, B, T);
  AttentionOptions o;
  if (c.block_size) {
    o.block_size = c.block_size, o.window_blocks = 2, o.global_blocks = 1;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j)
          if (!sparse_visible(i, j, c.block_size, 2, 1)) mask[(static_cast<size_t>(b) * T + i) * T + j] = false;
  }
  // Values exact in bf16, so in f16 too (randn's range).
  const Tensor qkv = test::randn_tensor({B, T, 3 * H * D}, 40 + T + D, DType::BF16);
  const Tensor dout = test::randn_tensor({B, T, H, D}, 41 + T + D, DType::BF16);
  const auto parts = [&](int which) { return qkv.view({B, T, 3, H, D}).select(2, which).contiguous().to_doubles(); };
  const BruteForce bf = brute_force_attention(mask, B, T, H, D, 1.f / std::sqrt(static_cast<float>(D)), parts(0),
                                              parts(1), parts(2), dout.to_doubles());
  const Tensor qkv_d = cast(qkv, c.dtype).to(Device::cuda(0)), dout_d = cast(dout, c.dtype).to(Device::cuda(0));
  o.doc_start = document_starts(Tensor::from_vector(tok, {B, T}).to(Device::cuda(0)));
  const std::string name = "T" + std::to_string(T) + " D" + std::to_string(D) + " sparse" +
                           std::to_string(c.block_size) + " " + std::string(dtype_name(c.dtype));
  for (const bool det : {false, true}) {
    o.deterministic = det;
    expect_flash_within_twice_naive(qkv_d, dout_d, B, T, H, D, o, {bf.o, bf.dq, bf.dk, bf.dv},
                                    name + (det ? " deterministic" : ""));
  }
}

TEST(DocMaskCuda, FlashAndNaiveAgainstBruteForce) {
  FT_REQUIRE_CUDA();
  for (const Case& c : {Case{200, 64, 0}, Case{200, 128, 0}, Case{333, 64, 0}, Case{333, 128, 0}, Case{300, 64, 64},
                        Case{300, 128, 32}})
    expect_case_against_brute_force(c);
}

// A kernel instantiated without the document mask compiles none of its code, so a launcher that
// would hand it a doc_start (the benchmark's direct launches) refuses by name. Host code only: runs
// without a GPU.
TEST(DocMaskCuda, KernelsWithoutTheMaskRefuseADocStart) {
  AttentionParams p;
  EXPECT_NO_THROW(cuda::flash::check_doc_mask_built<false>(p));
  EXPECT_NO_THROW(cuda::flash::check_doc_mask_built<true>(p));  // the twin also serves a dense call
  const int starts[1] = {0};
  p.doc_start = starts;
  EXPECT_NO_THROW(cuda::flash::check_doc_mask_built<true>(p));
  try {
    cuda::flash::check_doc_mask_built<false>(p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("document mask"), std::string::npos) << e.what();
  }
}

// The document mask is a template flag of the flash kernels (kDocMask), so every kernel the
// launchers pick has a document-mask twin of its own: these reach the twins the cases above do
// not -- f16, D = 256, and T > 2048 (the 128-row mma.sync forward tile, the two-warpgroup wgmma
// forward and the wide backward by default).
TEST(DocMaskCuda, HalfHeadDim256AndLongRowsTakeTheMask) {
  FT_REQUIRE_CUDA();
  for (const Case& c : {Case{200, 64, 0, DType::F16}, Case{333, 128, 0, DType::F16}, Case{333, 256, 0},
                        Case{200, 256, 0, DType::F16}, Case{2100, 64, 0, DType::BF16, 1}})
    expect_case_against_brute_force(c);
}

// Dropout under the document mask: against the float64 CPU reference with the same Philox state;
// and the deterministic backward in both forms (the ordered dQ's adds count only the key blocks the
// mask leaves) finishes and repeats bit for bit.
TEST(DocMaskCuda, DropoutAgainstReferenceAndDeterministicRepeats) {
  FT_REQUIRE_CUDA();
  // D = 64 bf16 as trained; f16 and D = 128, 256 reach the other dropout kernels' document-mask twins.
  for (const auto& [D, dtype] : {std::pair{64, DType::BF16}, std::pair{128, DType::F16}, std::pair{256, DType::BF16}}) {
    const int B = 2, H = 2, T = 384;
    const std::string name = "D" + std::to_string(D) + " " + dtype_name(dtype) + " p0.1";
    const std::vector<int32_t> tok = tokens_with_eots(B, T, {{0, 40, 41, 200, 333}, {100}});
    const Tensor qkv = test::randn_tensor({B, T, 3 * H * D}, 90, DType::BF16);  // values exact in bf16 and f16
    const Tensor dout = test::randn_tensor({B, T, H, D}, 91, DType::BF16);
    AttentionOptions o;
    o.dropout_p = 0.1f;
    o.philox = {77, 5};
    o.doc_start = document_starts(Tensor::from_vector(tok, {B, T}));
    const Result ref = run(true, cast(qkv, DType::F64), cast(dout, DType::F64), B, T, H, D, o);  // CPU float64
    const Expected expected{ref.fwd.out.to_doubles(), part(ref.dqkv, 0, B, T, H, D), part(ref.dqkv, 1, B, T, H, D),
                            part(ref.dqkv, 2, B, T, H, D)};
    const Tensor qkv_d = cast(qkv, dtype).to(Device::cuda(0)), dout_d = cast(dout, dtype).to(Device::cuda(0));
    o.doc_start = o.doc_start.to(Device::cuda(0));
    for (const bool det : {false, true}) {
      o.deterministic = det;
      expect_flash_within_twice_naive(qkv_d, dout_d, B, T, H, D, o, expected, name + (det ? " deterministic" : ""));
    }
    o.deterministic = true;
    // Both deterministic forms (flash_deterministic_dq; the default picks one per call): the
    // fixed-point dQ and the ordered one.
    for (const auto how : {cuda::FlashDeterministicDq::kFixedPoint, cuda::FlashDeterministicDq::kOrdered}) {
      const cuda::ScopedFlashDeterministicDq scope(how);
      const std::string form = how == cuda::FlashDeterministicDq::kOrdered ? " ordered dq" : " fixed-point dq";
      expect_flash_within_twice_naive(qkv_d, dout_d, B, T, H, D, o, expected, name + " deterministic" + form);
      const Result a = run(true, qkv_d, dout_d, B, T, H, D, o), b = run(true, qkv_d, dout_d, B, T, H, D, o);
      EXPECT_EQ(a.dqkv.to_doubles(), b.dqkv.to_doubles()) << name << form;
    }
  }
}

}  // namespace
}  // namespace ft::ops
