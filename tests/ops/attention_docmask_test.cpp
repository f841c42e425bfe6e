// The document mask on the CPU: document_starts follows the eot tokens; the float64 reference (the
// f32/f64 front door) equals a brute-force attention whose mask comes from the tokens; the tiled
// flash algorithm (with its tile skipping) and the low-precision naive, in bf16, stay within twice
// naive's error of it, with and without a block-sparse pattern on top; a row without eot is plain
// causal attention bit for bit; tile kinds never claim a pair wrongly and do skip whole documents;
// the front door refuses what breaks the contract.
#include <gtest/gtest.h>

#include <vector>

#include "ops/attention.h"
#include "ops/attention_params.h"
#include "ops/cpu/attention_reference.h"
#include "ops/document_mask.h"
#include "ops/elementwise.h"
#include "tests/ops/attention_test_util.h"
#include "tests/ops/docmask_test_util.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using namespace testing_attention;
using namespace testing_docmask;

TEST(DocumentStarts, FollowTheEndOfTextTokens) {
  const int T = 8;
  // Row 0: documents start at 2 and 5; tokens 0-1 are the tail of an earlier document.
  // Row 1: no eot. Row 2: eot at 0 and back to back at 3, 4, and at the last position.
  const std::vector<int32_t> tok = tokens_with_eots(3, T, {{2, 5}, {}, {0, 3, 4, 7}});
  const Tensor ds = ops::document_starts(Tensor::from_vector(tok, {3, T}));
  EXPECT_EQ(ds.shape(), Shape({3, T}));
  EXPECT_EQ(ds.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 2, 2, 2, 5, 5, 5,  //
                                                           0, 0, 0, 0, 0, 0, 0, 0,  //
                                                           0, 0, 0, 3, 4, 4, 4, 7}));
  // A strided (transposed back) batch gives the same.
  const Tensor strided = Tensor::from_vector(tok, {3, T}).transpose(0, 1).contiguous().transpose(0, 1);
  EXPECT_EQ(ops::document_starts(strided).to_vector<int32_t>(), ds.to_vector<int32_t>());
  // Another eot id.
  EXPECT_EQ(ops::document_starts(Tensor::from_vector(std::vector<int32_t>{1, 9, 1, 1}, {1, 4}), 9).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 1, 1}));
}

TEST(DocumentStarts, RejectsWhatIsNotAnInt32Batch) {
  test::expect_error([] { ops::document_starts(Tensor::zeros({2, 3}, DType::I64)); }, "[document_starts]", {"int32"});
  test::expect_error([] { ops::document_starts(Tensor::zeros({6}, DType::I32)); }, "[document_starts]", {"(B, T)"});
}

struct DocCase {
  int B, H, T, D;
  std::vector<std::vector<int>> eots;
};

// Row 1 has no eot; the others have documents starting inside tiles, back to back and at 0.
DocCase mixed_case(int T) {
  return {3, 2, T, 16, {{0, 5, T / 2 + 3, T - 1}, {}, {1, 2, 17, T - 20}}};
}

TEST(AttentionDocMask, Float64ReferenceEqualsBruteForce) {
  const DocCase c = mixed_case(37);
  const std::vector<int32_t> tok = tokens_with_eots(c.B, c.T, c.eots);
  const Shape bthd{c.B, c.T, c.H, c.D};
  const Tensor q = test::randn_tensor(bthd, 1, DType::F64), k = test::randn_tensor(bthd, 2, DType::F64),
               v = test::randn_tensor(bthd, 3, DType::F64), dout = test::randn_tensor(bthd, 4, DType::F64);
  ops::AttentionOptions o;
  o.doc_start = ops::document_starts(Tensor::from_vector(tok, {c.B, c.T}));
  const double scale = 1.f / std::sqrt(static_cast<float>(c.D));  // the front door's float scale
  const BruteForce ref = brute_force_attention(brute_force_mask(tok, c.B, c.T), c.B, c.T, c.H, c.D, scale,
                                               q.to_doubles(), k.to_doubles(),
                                               v.to_doubles(), dout.to_doubles());
  for (bool flash : {true, false}) {
    const ops::AttentionForward f =
        flash ? ops::flash_attention_forward(q, k, v, o) : ops::naive_attention_forward(q, k, v, o);
    const Tensor dq = Tensor::empty(bthd, DType::F64), dk = Tensor::empty(bthd, DType::F64),
                 dv = Tensor::empty(bthd, DType::F64);
    if (flash)
      ops::flash_attention_backward(q, k, v, f.out, f.lse, dout, o, dq, dk, dv);
    else
      ops::naive_attention_backward(q, k, v, f, dout, o, dq, dk, dv);
    EXPECT_LE(test::rel_error(f.out.to_doubles(), ref.o), 1e-12) << flash;
    EXPECT_LE(test::rel_error(f.lse.to_doubles(), ref.lse), 1e-12) << flash;
    EXPECT_LE(test::rel_error(dq.to_doubles(), ref.dq), 1e-12) << flash;
    EXPECT_LE(test::rel_error(dk.to_doubles(), ref.dk), 1e-12) << flash;
    EXPECT_LE(test::rel_error(dv.to_doubles(), ref.dv), 1e-12) << flash;
  }
}

// Block-sparse visibility, written out again for the brute-force mask.
bool sparse_visible(int i, int j, int bs, int window, int global) {
  const int qb = i / bs, kb = j / bs;
  return (kb <= qb && kb > qb - window) || kb < global;
}

TEST(AttentionDocMask, TiledFlashAndLowPrecisionNaiveWithinTwiceNaiveOfBruteForce) {
  struct Sparse {
    int bs, window, global;
  };
  for (const Sparse& sp : {Sparse{0, 0, 0}, Sparse{16, 2, 1}}) {
    const DocCase c = mixed_case(75);
    AttentionCase ac{c.B, c.H, c.T, c.D, true, 0.f};
    ac.block_size = sp.bs, ac.window_blocks = sp.window, ac.global_blocks = sp.global;
    AttentionParams cfg = config_of(ac);
    const std::vector<int32_t> tok = tokens_with_eots(c.B, c.T, c.eots);
    const std::vector<int32_t> ds = ops::document_starts(Tensor::from_vector(tok, {c.B, c.T})).to_vector<int32_t>();
    cfg.doc_start = ds.data();
    std::vector<bool> mask = brute_force_mask(tok, c.B, c.T);
    if (sp.bs)
      for (int b = 0; b < c.B; ++b)
        for (int i = 0; i < c.T; ++i)
          for (int j = 0; j < c.T; ++j)
            if (!sparse_visible(i, j, sp.bs, sp.window, sp.global)) mask[(static_cast<size_t>(b) * c.T + i) * c.T + j] = false;
    const AttentionInputs in = make_inputs(ac, 11);
    const BruteForce ref = brute_force_attention(mask, c.B, c.T, c.H, c.D, cfg.softmax_scale, to_double(in.q),
                                                 to_double(in.k), to_double(in.v), to_double(in.dout));
    const size_t n = in.q.size(), rows = static_cast<size_t>(c.B) * c.H * c.T;
    Outputs naive{std::vector<float>(n), std::vector<float>(rows), std::vector<float>(n), std::vector<float>(n),
                  std::vector<float>(n)};
    cpu::naive_lowp_forward(cfg, in.q.data(), in.k.data(), in.v.data(), naive.o.data(), naive.lse.data());
    cpu::naive_lowp_backward(cfg, in.q.data(), in.k.data(), in.v.data(), in.dout.data(), naive.dq.data(),
                             naive.dk.data(), naive.dv.data());
    for (const auto& [bm, bn] : {std::pair{16, 16}, std::pair{16, 32}, std::pair{32, 16}, std::pair{64, 64}}) {
      Outputs f = naive;
      cpu::flash_tiled_forward(cfg, bm, bn, in.q.data(), in.k.data(), in.v.data(), f.o.data(), f.lse.data());
      cpu::flash_tiled_backward(cfg, bm, bn, in.q.data(), in.k.data(), in.v.data(), f.o.data(), f.lse.data(),
                                in.dout.data(), f.dq.data(), f.dk.data(), f.dv.data());
      const std::string name = "sparse " + std::to_string(sp.bs) + " tiles " + std::to_string(bm) + "x" + std::to_string(bn);
      const std::vector<float>* fo[] = {&f.o, &f.dq, &f.dk, &f.dv};
      const std::vector<float>* no[] = {&naive.o, &naive.dq, &naive.dk, &naive.dv};
      const std::vector<double>* r[] = {&ref.o, &ref.dq, &ref.dk, &ref.dv};
      for (int i = 0; i < 4; ++i) {
        const double ef = rel_error(*fo[i], *r[i]), en = rel_error(*no[i], *r[i]);
        EXPECT_LE(en, 5e-2) << name << " output " << i << " (naive against brute force)";
        EXPECT_LE(ef, 2 * en + 1e-5) << name << " output " << i << ": flash " << ef << " naive " << en;
      }
      EXPECT_LE(lse_error(f.lse, ref.lse), 2e-3) << name;
    }
    EXPECT_LE(lse_error(naive.lse, ref.lse), 2e-3);
  }
}

TEST(AttentionDocMask, RowsWithoutEotAreCausalAttentionBitForBit) {
  const int B = 2, T = 21, H = 2, D = 8;
  const Shape bthd{B, T, H, D};
  const Tensor q = test::randn_tensor(bthd, 5, DType::F64), k = test::randn_tensor(bthd, 6, DType::F64),
               v = test::randn_tensor(bthd, 7, DType::F64);
  ops::AttentionOptions plain, doc;
  // Row 0 has no eot, row 1 one at position 0 only: both are one document.
  doc.doc_start = ops::document_starts(Tensor::from_vector(tokens_with_eots(B, T, {{}, {0}}), {B, T}));
  EXPECT_EQ(ops::flash_attention_forward(q, k, v, doc).out.to_doubles(),
            ops::flash_attention_forward(q, k, v, plain).out.to_doubles());
  // bf16 runs the tiled flash reference: the same there.
  const Tensor qb = ops::cast(q, DType::BF16), kb = ops::cast(k, DType::BF16), vb = ops::cast(v, DType::BF16);
  EXPECT_EQ(ops::flash_attention_forward(qb, kb, vb, doc).out.to_doubles(),
            ops::flash_attention_forward(qb, kb, vb, plain).out.to_doubles());
}

// Every tile of every tiling, against the pairs it covers: kTileEmpty has none visible, kTileFull
// all; and a tile of rows inside one document with keys all before it is empty (skipped).
TEST(AttentionDocMask, TileKindsAreConservativeAndSkipOtherDocuments) {
  const int T = 70;
  const std::vector<int32_t> tok = tokens_with_eots(2, T, {{3, 20, 21, 40, 69}, {}});
  const std::vector<int32_t> ds = ops::document_starts(Tensor::from_vector(tok, {2, T})).to_vector<int32_t>();
  for (const int bs : {0, 8}) {
    AttentionParams p;
    p.B = 2, p.T = T, p.H = 1, p.D = 8, p.causal = true;
    p.block_size = bs, p.window_blocks = bs ? 2 : 0, p.global_blocks = bs ? 1 : 0;
    p.doc_start = ds.data();
    for (int bm : {1, 4, 16})
      for (int bn : {1, 8, 16})
        for (int b = 0; b < 2; ++b)
          for (int m0 = 0; m0 < T; m0 += bm)
            for (int n0 = 0; n0 < T; n0 += bn) {
              const int m1 = std::min(m0 + bm, T), n1 = std::min(n0 + bn, T);
              int visible = 0;
              for (int i = m0; i < m1; ++i)
                for (int j = n0; j < n1; ++j) {
                  const bool doc = j >= ds[b * T + i];
                  const bool want = j <= i && doc && (bs == 0 || sparse_visible(i, j, bs, 2, 1));
                  EXPECT_EQ(attention_allowed(p, b, i, j), want) << b << " " << i << " " << j;
                  visible += want;
                }
              const int kind = attention_tile_kind(p, b, m0, m1, n0, n1);
              if (kind == kTileEmpty) {
                EXPECT_EQ(visible, 0) << b << " " << m0 << " " << n0 << " " << bm << "x" << bn;
              }
              if (kind == kTileFull) {
                EXPECT_EQ(visible, (m1 - m0) * (n1 - n0)) << b << " " << m0 << " " << n0 << " " << bm << "x" << bn;
              }
            }
  }
  AttentionParams p;
  p.B = 1, p.T = T, p.H = 1, p.D = 8, p.causal = true, p.doc_start = ds.data();
  EXPECT_EQ(attention_tile_kind(p, 0, 48, 64, 0, 16), kTileEmpty);   // rows in the document from 40
  EXPECT_EQ(attention_tile_kind(p, 0, 48, 64, 40, 48), kTileFull);   // keys 40..47, rows 48..63
  EXPECT_EQ(attention_tile_kind(p, 0, 16, 32, 16, 32), kTilePartial);  // boundaries at 20, 21
}

TEST(AttentionDocMask, FrontDoorChecksTheContract) {
  const int B = 2, T = 6, H = 1, D = 4;
  const Shape bthd{B, T, H, D};
  const Tensor q = test::randn_tensor(bthd, 1, DType::F64);
  auto run = [&](const std::vector<int32_t>& ds, const Shape& shape, bool causal = true) {
    ops::AttentionOptions o;
    o.causal = causal;
    o.doc_start = Tensor::from_vector(ds, shape);
    ops::flash_attention_forward(q, q, q, o);
  };
  const std::vector<int32_t> good{0, 0, 2, 2, 2, 5, 0, 1, 1, 1, 1, 1};
  run(good, {B, T});  // accepted
  test::expect_error([&] { run(good, {B, T}, false); }, "[flash_attention]", {"causal"});
  test::expect_error([&] { run(good, {T, B}); }, "[flash_attention]", {"doc_start", "(2, 6)"});
  std::vector<int32_t> late = good;
  late[3] = 4;  // past its position
  test::expect_error([&] { run(late, {B, T}); }, "[flash_attention]", {"doc_start[0, 3] = 4"});
  std::vector<int32_t> back = good;
  back[9] = 0;  // goes back
  test::expect_error([&] { run(back, {B, T}); }, "[flash_attention]", {"doc_start[1, 3] = 0", "non-decreasing"});
  ops::AttentionOptions o;
  o.doc_start = Tensor::zeros({B, T}, DType::I64);
  test::expect_error([&] { ops::naive_attention_forward(q, q, q, o); }, "[naive_attention]", {"i32"});
}

}  // namespace
}  // namespace ft
