#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/embedding.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::randn_tensor;
using test::rel_error;

// Ids with repeats (the scatter-add must sum them), both ends of the table, and a skewed run
// like a frequent token.
std::vector<int32_t> make_ids(int64_t n, int64_t V) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 31 + 7) % V);
  for (int64_t i = 0; i < n; i += 3) ids[i] = static_cast<int32_t>(V / 2);
  ids[0] = 0;
  ids[n - 1] = static_cast<int32_t>(V - 1);
  return ids;
}

TEST(Embedding, CpuMatchesNaiveReference) {
  const int64_t V = 11, C = 5, B = 2, T = 7;
  const Tensor w = randn_tensor({V, C}, 1);
  const auto ids = make_ids(B * T, V);
  const Tensor tid = Tensor::from_vector(ids, {B, T});
  const Tensor out = ops::embedding_forward(tid, w);
  ASSERT_EQ(out.shape(), (Shape{B, T, C}));
  const auto wv = w.to_floats(), ov = out.to_floats();
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(ov[i * C + c], wv[ids[i] * C + c]);
  const Tensor dout = randn_tensor({B, T, C}, 2);
  const auto dv = dout.to_doubles();
  std::vector<double> ref(V * C, 0.0);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t c = 0; c < C; ++c) ref[ids[i] * C + c] += dv[i * C + c];
  const Tensor dw = ops::embedding_backward(dout, tid, V);
  EXPECT_EQ(dw.shape(), (Shape{V, C}));
  EXPECT_EQ(dw.dtype(), DType::F32);
  EXPECT_LT(rel_error(dw.to_doubles(), ref), 1e-6);
  // Accumulating variant adds onto what is there.
  Tensor acc = Tensor::full({V, C}, 1.0, DType::F32);
  ops::embedding_backward_(acc, dout, tid);
  for (auto& r : ref) r += 1.0;
  EXPECT_LT(rel_error(acc.to_doubles(), ref), 1e-6);
}

TEST(Embedding, CpuHalfTableAndOtherIdDtypes) {
  const int64_t V = 9, C = 4;
  const Tensor w = randn_tensor({V, C}, 3, DType::BF16);
  const Tensor ids16 = Tensor::from_vector<uint16_t>({8, 0, 8}, {3});
  const Tensor out = ops::embedding_forward(ids16, w);
  EXPECT_EQ(out.dtype(), DType::BF16);
  const auto wv = w.to_floats(), ov = out.to_floats();
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(ov[c], wv[8 * C + c]);
    EXPECT_EQ(ov[C + c], wv[c]);
  }
  const Tensor dout = randn_tensor({3, C}, 4, DType::BF16);
  const auto dv = dout.to_floats();
  const auto dw = ops::embedding_backward(dout, Tensor::from_vector<int64_t>({8, 0, 8}, {3}), V).to_floats();
  for (int c = 0; c < C; ++c) {
    EXPECT_FLOAT_EQ(dw[8 * C + c], dv[c] + dv[2 * C + c]);  // fp32 sum of bf16 values
    EXPECT_EQ(dw[C + c], 0.f);
  }
}

TEST(Embedding, BadInputsNameTheOp) {
  const Tensor w = Tensor::zeros({10, 4}, DType::F32);
  try {
    ops::embedding_forward(Tensor::from_vector<int32_t>({1, 10}, {2}), w);
    FAIL() << "id == V accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[embedding]"), std::string::npos) << m;
    EXPECT_NE(m.find("id 10"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::embedding_forward(Tensor::from_vector<int32_t>({-1}, {1}), w), Error);
  EXPECT_THROW(ops::embedding_forward(Tensor::zeros({2}, DType::F32), w), Error);
  EXPECT_THROW(ops::embedding_forward(Tensor::zeros({2}, DType::I32), Tensor::zeros({10}, DType::F32)), Error);
  try {
    ops::embedding_backward_(Tensor::zeros({10, 4}, DType::F32), Tensor::zeros({3, 4}, DType::F32),
                             Tensor::zeros({2}, DType::I32));
    FAIL() << "mismatched dout accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[embedding_backward]"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 4)"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::embedding_backward_(Tensor::zeros({10, 4}, DType::BF16), Tensor::zeros({2, 4}, DType::BF16),
                                        Tensor::zeros({2}, DType::I32)),
               Error);  // the gradient table must be fp32
}

TEST(EmbeddingCuda, MatchesCpuAndIsDeterministic) {
  FT_REQUIRE_CUDA();
  const int64_t V = 1000;
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t C : {int64_t{768}, int64_t{37}, int64_t{1032}}) {  // vector path, scalar path, two sweeps
      const int64_t n = 3300;  // the run of V/2 spans two of the kernel's 1024-row chunks
      const Tensor w = randn_tensor({V, C}, 5, dt);
      const Tensor ids = Tensor::from_vector(make_ids(n, V), {3, n / 3});
      const Tensor gw = w.to(Device::cuda()), gids = ids.to(Device::cuda());
      EXPECT_EQ(ops::embedding_forward(gids, gw).to_floats(), ops::embedding_forward(ids, w).to_floats()) << dt;
      const Tensor dout = randn_tensor({3, n / 3, C}, 6, dt);
      const Tensor gdout = dout.to(Device::cuda());
      const Tensor d1 = ops::embedding_backward(gdout, gids, V), d2 = ops::embedding_backward(gdout, gids, V);
      EXPECT_EQ(d1.to_floats(), d2.to_floats()) << "the CUDA scatter-add must be bitwise reproducible";
      // fp32 sums of the same values in a different order: the run of V/2 has ~1100 terms.
      EXPECT_LT(rel_error(d1, ops::embedding_backward(dout, ids, V)), 1e-5) << dt << " C=" << C;
    }
  }
  // Out-of-range ids are unchecked on the device: a NaN row forward, skipped backward.
  const Tensor w = randn_tensor({V, 8}, 7).to(Device::cuda());
  const Tensor bad = Tensor::from_vector<int32_t>({3, 1000, -1}, {3}).to(Device::cuda());
  const auto out = ops::embedding_forward(bad, w).to_floats();
  EXPECT_FALSE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[8]));
  EXPECT_TRUE(std::isnan(out[16]));
  const auto dw = ops::embedding_backward(Tensor::full({3, 8}, 1.0, DType::F32).to(Device::cuda()), bad, V).to_floats();
  double total = 0;
  for (float v : dw) total += v;
  EXPECT_EQ(total, 8.0) << "only the in-range id contributes";
}

}  // namespace
}  // namespace ft
