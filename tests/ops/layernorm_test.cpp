#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::mean_relative_bias;
using test::randn;
using test::randn_tensor;
using test::rel_error;

// Independent float64 reference: statistics by direct summation, and the input gradient through
// the explicit Jacobian d xhat_i / d x_j = rstd (delta_ij - 1/C - xhat_i xhat_j / C), which shares
// no algebra with the kernels' closed form.
struct NaiveLayerNorm {
  std::vector<double> y, mean, rstd, dx, dw, db;
};

NaiveLayerNorm naive_layernorm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                               const std::vector<double>& dy, int64_t rows, int64_t C, double eps) {
  NaiveLayerNorm r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dw.assign(C, 0.0);
  r.db.assign(C, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[i * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + eps);
    r.mean.push_back(m);
    r.rstd.push_back(s);
    std::vector<double> xh(C);
    for (int64_t c = 0; c < C; ++c) {
      xh[c] = (x[i * C + c] - m) * s;
      r.y[i * C + c] = xh[c] * w[c] + b[c];
      r.dw[c] += dy[i * C + c] * xh[c];
      r.db[c] += dy[i * C + c];
    }
    for (int64_t j = 0; j < C; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < C; ++k) {
        const double jac = s * ((k == j ? 1.0 : 0.0) - 1.0 / C - xh[k] * xh[j] / C);
        acc += dy[i * C + k] * w[k] * jac;
      }
      r.dx[i * C + j] = acc;
    }
  }
  return r;
}

TEST(LayerNorm, CpuMatchesNaiveReference) {
  const int64_t rows = 7, C = 37;
  const double eps = 1e-5;
  const Tensor x = randn_tensor({rows, C}, 1, DType::F32, Device::cpu(), 2.f);
  const Tensor w = randn_tensor({C}, 2), b = randn_tensor({C}, 3), dy = randn_tensor({rows, C}, 4);
  const auto ref = naive_layernorm(x.to_doubles(), w.to_doubles(), b.to_doubles(), dy.to_doubles(), rows, C, eps);
  const ops::LayerNormOut out = ops::layernorm_forward(x, w, b, eps);
  EXPECT_EQ(out.mean.shape(), Shape{rows});
  EXPECT_EQ(out.mean.dtype(), DType::F32);
  // f32 storage of double-accurate results: errors are a few f32 ulps.
  EXPECT_LT(rel_error(out.y.to_doubles(), ref.y), 1e-6);
  EXPECT_LT(rel_error(out.mean.to_doubles(), ref.mean), 1e-6);
  EXPECT_LT(rel_error(out.rstd.to_doubles(), ref.rstd), 1e-6);
  const ops::LayerNormGrads g = ops::layernorm_backward(dy, x, w, out.mean, out.rstd);
  EXPECT_EQ(g.dweight.dtype(), DType::F32);
  EXPECT_LT(rel_error(g.dx.to_doubles(), ref.dx), 1e-5);
  EXPECT_LT(rel_error(g.dweight.to_doubles(), ref.dw), 1e-6);
  EXPECT_LT(rel_error(g.dbias.to_doubles(), ref.db), 1e-6);
}

TEST(LayerNorm, CpuHalfInputsComputeInFp32AndRoundOnce) {
  const int64_t rows = 4, C = 24;
  for (DType dt : {DType::BF16, DType::F16}) {
    const Tensor x = randn_tensor({2, 2, C}, 5, dt), w = randn_tensor({C}, 6, dt), b = randn_tensor({C}, 7, dt);
    const Tensor dy = randn_tensor({2, 2, C}, 8, dt);
    const auto ref = naive_layernorm(x.to_doubles(), w.to_doubles(), b.to_doubles(), dy.to_doubles(), rows, C, 1e-5);
    const ops::LayerNormOut out = ops::layernorm_forward(x, w, b);
    ASSERT_EQ(out.y.dtype(), dt);
    EXPECT_EQ(out.mean.shape(), (Shape{2, 2}));
    // One rounding of the output: within half an ulp of the dtype (bf16 2^-9, f16 2^-12 relative).
    const double tol = dt == DType::BF16 ? 4e-3 : 5e-4;
    EXPECT_LT(rel_error(out.y.to_doubles(), ref.y), tol) << dt;
    EXPECT_LT(rel_error(out.rstd.to_doubles(), ref.rstd), 1e-6) << dt;  // fp32 statistics, unrounded
    const ops::LayerNormGrads g = ops::layernorm_backward(dy, x, w, out.mean, out.rstd);
    EXPECT_EQ(g.dx.dtype(), dt);
    EXPECT_EQ(g.dweight.dtype(), DType::F32);
    EXPECT_LT(rel_error(g.dx.to_doubles(), ref.dx), tol) << dt;
    EXPECT_LT(rel_error(g.dweight.to_doubles(), ref.dw), 1e-5) << dt;  // fp32 sums of exact products
    EXPECT_LT(rel_error(g.dbias.to_doubles(), ref.db), 1e-6) << dt;
  }
}

TEST(LayerNorm, BadInputsNameTheOpAndShapes) {
  const Tensor x = Tensor::zeros({4, 8}, DType::F32);
  const Tensor w = Tensor::zeros({8}, DType::F32);
  try {
    ops::layernorm_forward(x, Tensor::zeros({7}, DType::F32), w);
    FAIL() << "mismatched weight accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[layernorm]"), std::string::npos) << m;
    EXPECT_NE(m.find("(7,)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 8)"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::layernorm_forward(x, Tensor::zeros({8}, DType::BF16), w), Error);  // weight dtype
  EXPECT_THROW(ops::layernorm_forward(x, w, Tensor::zeros({9}, DType::F32)), Error);   // bias shape
  EXPECT_THROW(ops::layernorm_forward(Tensor::zeros({4, 8}, DType::I32), w, w), Error);
  EXPECT_THROW(ops::layernorm_forward(Tensor::zeros({4, 0}, DType::F32), w, w), Error);
  const ops::LayerNormOut out = ops::layernorm_forward(x, w, w);
  try {
    ops::layernorm_backward(Tensor::zeros({4, 7}, DType::F32), x, w, out.mean, out.rstd);
    FAIL() << "mismatched dy accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[layernorm_backward]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::layernorm_backward(x, x, w, Tensor::zeros({3}, DType::F32), out.rstd), Error);
  EXPECT_THROW(ops::layernorm_backward(x, x, w, out.mean, Tensor::zeros({4}, DType::BF16)), Error);
}

// fp32 parameters under half x (a model whose LayerNorms stay fp32, nn::LayerNorm): computed with
// the fp32 values, not their rounding to x's dtype. The gain is one constant c = 1 + 0.49 ulp of
// the dtype at 1 (b = 0), so y and dx are exactly c times those of gain 1; rounding c to the dtype
// would give 1, a bias of -0.49 ulp in every element that output rounding noise does not hide
// over a few hundred elements. The test first checks that it sees that bias with rounded
// parameters, on the same device.
void expect_fp32_params_unrounded(Device dev, const Shape& shape, DType dt) {
  const int64_t C = shape.back(), rows = shape_numel(shape) / C;
  const double ulp = dt == DType::BF16 ? 0x1p-7 : 0x1p-10, c = 1 + 0.49 * ulp;
  const Tensor x = randn_tensor(shape, 40, dt, Device::cpu(), 2.f), dy = randn_tensor(shape, 41, dt);
  const Tensor w = Tensor::full({C}, c, DType::F32), b = Tensor::zeros({C}, DType::F32);
  const auto ref = naive_layernorm(x.to_doubles(), w.to_doubles(), b.to_doubles(), dy.to_doubles(), rows, C, 1e-5);
  const std::string what = str(dev, " ", dt, " ", shape);
  for (const bool rounded : {true, false}) {
    const Tensor wd = (rounded ? ops::cast(w, dt) : w).to(dev), bd = (rounded ? ops::cast(b, dt) : b).to(dev);
    const ops::LayerNormOut out = ops::layernorm_forward(x.to(dev), wd, bd);
    const ops::LayerNormGrads g = ops::layernorm_backward(dy.to(dev), x.to(dev), wd, out.mean, out.rstd);
    const double bias_y = mean_relative_bias(out.y.to_doubles(), ref.y);
    const double bias_dx = mean_relative_bias(g.dx.to_doubles(), ref.dx);
    if (rounded) {  // the test can fail: rounding c shows
      EXPECT_LT(bias_y, -0.3 * ulp) << what;
      EXPECT_LT(bias_dx, -0.3 * ulp) << what;
    } else {
      EXPECT_LT(std::fabs(bias_y), 0.1 * ulp) << what;
      EXPECT_LT(std::fabs(bias_dx), 0.1 * ulp) << what;
      EXPECT_EQ(g.dweight.dtype(), DType::F32);
    }
  }
}

TEST(LayerNorm, CpuFp32ParamsUnderHalfInputsAreNotRounded) {
  for (DType dt : {DType::BF16, DType::F16}) expect_fp32_params_unrounded(Device::cpu(), {12, 40}, dt);
}

TEST(LayerNorm, ParamsOfAnotherDtypeThanFp32UnderHalvesAreRefused) {
  const Tensor x = Tensor::zeros({4, 8}, DType::BF16);
  for (DType wt : {DType::F16, DType::F64}) {
    try {
      ops::layernorm_forward(x, Tensor::zeros({8}, wt), Tensor::zeros({8}, wt));
      FAIL() << wt << " weight accepted under bf16 x";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("[layernorm]"), std::string::npos) << m;
      EXPECT_NE(m.find("f32 under bf16 / f16"), std::string::npos) << m;
    }
  }
  // Weight and bias share a dtype.
  EXPECT_THROW(ops::layernorm_forward(x, Tensor::zeros({8}, DType::F32), Tensor::zeros({8}, DType::BF16)), Error);
}

// CUDA against the CPU path on the same (rounded) inputs. Shapes cover both kernel paths and
// their edges: C = 768 (GPT-2, register path), C not a multiple of the 8-wide bf16 vector
// (looping path), rows not a multiple of the 4 rows per block, C beyond the backward register
// path (1544) and the forward one (4104 for halves), and a misaligned view of x.
TEST(LayerNormCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  const Shape shapes[] = {{5, 768}, {33, 100}, {2, 3, 64}, {9, 1544}, {3, 4104}, {1, 1}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (const Shape& shape : shapes) {
      const int64_t C = shape.back();
      const Tensor x = randn_tensor(shape, 10, dt, Device::cpu(), 3.f), dy = randn_tensor(shape, 11, dt);
      const Tensor w = randn_tensor({C}, 12, dt), b = randn_tensor({C}, 13, dt);
      const ops::LayerNormOut cpu = ops::layernorm_forward(x, w, b);
      const ops::LayerNormOut gpu =
          ops::layernorm_forward(x.to(Device::cuda()), w.to(Device::cuda()), b.to(Device::cuda()));
      // f32: both fp32 math, different summation orders -> ~1e-6. Halves: both round one fp32
      // value to the dtype, and order differences flip a rounding now and then (1 ulp).
      const double tol = dt == DType::F32 ? 1e-5 : (dt == DType::BF16 ? 8e-3 : 1e-3);
      EXPECT_LT(rel_error(gpu.y, cpu.y), tol) << dt << " " << shape;
      EXPECT_LT(rel_error(gpu.mean, cpu.mean), 1e-5) << dt << " " << shape;
      EXPECT_LT(rel_error(gpu.rstd, cpu.rstd), 1e-5) << dt << " " << shape;
      const ops::LayerNormGrads gc = ops::layernorm_backward(dy, x, w, cpu.mean, cpu.rstd);
      const ops::LayerNormGrads gg = ops::layernorm_backward(dy.to(Device::cuda()), x.to(Device::cuda()),
                                                             w.to(Device::cuda()), gpu.mean, gpu.rstd);
      EXPECT_LT(rel_error(gg.dx, gc.dx), tol) << dt << " " << shape;
      // fp32 sums over rows in a different order from the CPU's double sums.
      EXPECT_LT(rel_error(gg.dweight, gc.dweight), 1e-4) << dt << " " << shape;
      EXPECT_LT(rel_error(gg.dbias, gc.dbias), 1e-4) << dt << " " << shape;
    }
  }
}

// fp32 parameters under half x on every kernel path (the shapes of MatchesCpu): against the CPU
// path with the same fp32 parameters (random, so that a parameter read at the wrong channel
// shows), and the no-rounding check above.
TEST(LayerNormCuda, Fp32ParamsUnderHalvesMatchCpuOnEveryPath) {
  FT_REQUIRE_CUDA();
  const Shape shapes[] = {{5, 768}, {33, 100}, {2, 3, 64}, {9, 1544}, {3, 4104}};
  for (DType dt : {DType::BF16, DType::F16}) {
    for (const Shape& shape : shapes) {
      const int64_t C = shape.back();
      const std::string what = str(dt, " ", shape);
      const Tensor x = randn_tensor(shape, 50, dt, Device::cpu(), 3.f), dy = randn_tensor(shape, 51, dt);
      const Tensor w = randn_tensor({C}, 52), b = randn_tensor({C}, 53);  // f32
      const ops::LayerNormOut cpu = ops::layernorm_forward(x, w, b);
      const ops::LayerNormOut gpu =
          ops::layernorm_forward(x.to(Device::cuda()), w.to(Device::cuda()), b.to(Device::cuda()));
      const double tol = dt == DType::BF16 ? 8e-3 : 1e-3;
      EXPECT_LT(rel_error(gpu.y, cpu.y), tol) << what;
      EXPECT_LT(rel_error(gpu.rstd, cpu.rstd), 1e-5) << what;
      const ops::LayerNormGrads gc = ops::layernorm_backward(dy, x, w, cpu.mean, cpu.rstd);
      const ops::LayerNormGrads gg = ops::layernorm_backward(dy.to(Device::cuda()), x.to(Device::cuda()),
                                                             w.to(Device::cuda()), gpu.mean, gpu.rstd);
      EXPECT_LT(rel_error(gg.dx, gc.dx), tol) << what;
      EXPECT_LT(rel_error(gg.dweight, gc.dweight), 1e-4) << what;
      EXPECT_LT(rel_error(gg.dbias, gc.dbias), 1e-4) << what;
      if (shape.size() == 2 && shape[0] >= 5) expect_fp32_params_unrounded(Device::cuda(), shape, dt);
    }
  }
}

TEST(LayerNormCuda, MisalignedViewAndDeterministicBackward) {
  FT_REQUIRE_CUDA();
  const int64_t rows = 70, C = 768;
  // x starts one element past a 16-byte boundary: the launcher must take the scalar path.
  const Tensor big = randn_tensor({rows * C + 1}, 20, DType::BF16);
  const Tensor x = big.slice(0, 1, rows * C + 1).view({rows, C});
  const Tensor w = randn_tensor({C}, 21, DType::BF16), b = randn_tensor({C}, 22, DType::BF16);
  const Tensor dy = randn_tensor({rows, C}, 23, DType::BF16);
  const ops::LayerNormOut cpu = ops::layernorm_forward(x, w, b);
  const Tensor gx = big.to(Device::cuda()).slice(0, 1, rows * C + 1).view({rows, C});
  const Tensor gw = w.to(Device::cuda()), gdy = dy.to(Device::cuda());
  const ops::LayerNormOut gpu = ops::layernorm_forward(gx, gw, b.to(Device::cuda()));
  EXPECT_LT(rel_error(gpu.y, cpu.y), 8e-3);
  const ops::LayerNormGrads g1 = ops::layernorm_backward(gdy, gx, gw, gpu.mean, gpu.rstd);
  const ops::LayerNormGrads g2 = ops::layernorm_backward(gdy, gx, gw, gpu.mean, gpu.rstd);
  EXPECT_EQ(g1.dweight.to_floats(), g2.dweight.to_floats()) << "dweight must be bitwise reproducible";
  EXPECT_EQ(g1.dbias.to_floats(), g2.dbias.to_floats());
  const ops::LayerNormGrads gc = ops::layernorm_backward(dy, x, w, cpu.mean, cpu.rstd);
  EXPECT_LT(rel_error(g1.dx, gc.dx), 8e-3);
  EXPECT_LT(rel_error(g1.dweight, gc.dweight), 1e-4);
}

}  // namespace
}  // namespace ft
