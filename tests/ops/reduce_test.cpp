#include <gtest/gtest.h>

#include <string>

#include "ops/reduce.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::expect_error;

using test::randn_tensor;
using test::rel_error;

// Independent reference: sums x over `axis` with double loops over the logical index.
std::vector<double> naive_reduce(const Tensor& x, int axis, bool mean) {
  const auto v = x.to_doubles();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.size(i);
  for (int i = axis + 1; i < x.dim(); ++i) inner *= x.size(i);
  const int64_t r = x.size(axis);
  std::vector<double> out(static_cast<size_t>(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < r; ++j)
      for (int64_t i = 0; i < inner; ++i) out[o * inner + i] += v[(o * r + j) * inner + i];
  if (mean)
    for (double& d : out) d /= static_cast<double>(r);
  return out;
}

TEST(Reduce, CpuMatchesNaiveOnEveryAxis) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = randn_tensor({3, 4, 5}, 1, dt);
    for (int axis = -3; axis < 3; ++axis) {
      const int a = axis < 0 ? axis + 3 : axis;
      for (bool keepdim : {false, true}) {
        const Tensor s = ops::sum(x, axis, keepdim), m = ops::mean(x, axis, keepdim);
        Shape want = x.shape();
        if (keepdim) want[a] = 1;
        else want.erase(want.begin() + a);
        EXPECT_EQ(s.shape(), want);
        EXPECT_EQ(s.dtype(), dt);
        const double tol = dt == DType::F64 ? 1e-14 : 1e-6;
        EXPECT_LT(rel_error(s.to_doubles(), naive_reduce(x, a, false)), tol) << axis;
        EXPECT_LT(rel_error(m.to_doubles(), naive_reduce(x, a, true)), tol) << axis;
      }
    }
  }
}

TEST(Reduce, CpuNonContiguousAndHalfInputs) {
  const Tensor x = randn_tensor({6, 4}, 2).transpose(0, 1);  // (4, 6) view
  EXPECT_LT(rel_error(ops::sum(x, 1).to_doubles(), naive_reduce(x.contiguous(), 1, false)), 1e-6);
  for (DType dt : {DType::BF16, DType::F16}) {
    const Tensor h = randn_tensor({16, 24}, 3, dt);
    const Tensor s = ops::sum(h, 0);
    EXPECT_EQ(s.dtype(), dt);
    // fp32 sums of the rounded inputs, rounded once to the output dtype (< 2^-8 relative).
    EXPECT_LT(rel_error(s.to_doubles(), naive_reduce(h, 0, false)), 4e-3) << dt;
  }
}

TEST(Reduce, BackwardRepeatsAlongTheAxis) {
  const Tensor dy = randn_tensor({3, 5}, 4);
  const Tensor dx = ops::reduce_backward(dy, {3, 4, 5}, 1, 0.25);
  ASSERT_EQ(dx.shape(), (Shape{3, 4, 5}));
  const auto g = dx.to_doubles(), d = dy.to_doubles();
  for (int o = 0; o < 3; ++o)
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(g[(o * 4 + j) * 5 + i], 0.25 * d[o * 5 + i]);
  // A keepdim-shaped dy works too.
  EXPECT_EQ(ops::reduce_backward(dy.view({3, 1, 5}), {3, 4, 5}, 1, 1.0).shape(), (Shape{3, 4, 5}));
}

TEST(Reduce, BadInputsNameTheOp) {
  expect_error([] { ops::sum(Tensor::zeros({2, 3}, DType::I32), 0); }, "[sum]", {"i32"});
  expect_error([] { ops::mean(Tensor::zeros({2, 3}, DType::F32), 2); }, "[mean]");
  expect_error([] { ops::sum(Tensor::zeros({}, DType::F32), 0); }, "[sum]", {"0-d"});
  expect_error([] { ops::reduce_backward(Tensor::zeros({3, 4}, DType::F32), {3, 4, 5}, 1, 1.0); },
               "[reduce_backward]", {"(3, 4)", "(3, 4, 5)"});
}

TEST(ReduceCuda, MatchesCpuOnEveryKernelPath) {
  FT_REQUIRE_CUDA();
  struct Case {
    Shape shape;
    int axis;
  };
  const std::vector<Case> cases = {
      {{2048, 768}, 0},    // bias gradient: column kernel with split rows + final pass
      {{3, 5}, 0},         // column kernel, one slice
      {{4, 300, 33}, 1},   // outer > 1 and inner > 1
      {{300, 77}, -1},     // last axis, a warp per row
      {{7, 5000}, 1},      // last axis, a block per row
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const Tensor x = randn_tensor(c.shape, seed++, dt);
      const Tensor gx = x.to(Device::cuda());
      for (bool mean : {false, true}) {
        const Tensor want = mean ? ops::mean(x, c.axis) : ops::sum(x, c.axis);
        const Tensor got = mean ? ops::mean(gx, c.axis) : ops::sum(gx, c.axis);
        ASSERT_EQ(got.shape(), want.shape());
        // Both accumulate the same rounded inputs in fp32, in different orders: f32 results agree
        // to ~1e-6; half results additionally may round to neighbouring values (one ulp).
        const double tol = dt == DType::F32 ? 1e-5 : (dt == DType::BF16 ? 8e-3 : 2e-3);
        EXPECT_LT(rel_error(got, want), tol) << dt << " " << c.shape << " axis " << c.axis;
      }
      // Deterministic: the same bits every time.
      EXPECT_EQ(ops::sum(gx, c.axis).to_floats(), ops::sum(gx, c.axis).to_floats());
    }
  }
}

// sum_rows_into: out += column sums, against the naive reduction in double plus the start value.
std::vector<double> naive_sum_rows_into(const Tensor& x2, const Tensor& out0) {
  std::vector<double> want = naive_reduce(x2.contiguous(), 0, false);
  const auto start = out0.to_doubles();
  for (size_t i = 0; i < want.size(); ++i) want[i] += start[i];
  return want;
}

TEST(Reduce, SumRowsIntoAddsColumnSums) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = randn_tensor({3, 7, 5}, 31, dt);
    const Tensor out = randn_tensor({5}, 32, dt);
    const auto want = naive_sum_rows_into(x.reshape({21, 5}), out);
    ops::sum_rows_into(x, out);
    EXPECT_LT(rel_error(out.to_doubles(), want), 1e-6);
  }
  expect_error([] { ops::sum_rows_into(Tensor::zeros({4, 3}, DType::F32), Tensor::zeros({4}, DType::F32)); },
               "[sum_rows_into]");
}

// Every kernel path: 16-byte vectors (C % 8 == 0 for bf16), scalar (odd C), padded rows (a slice
// of wider rows), rows that do not fill the last slice.
TEST(ReduceCuda, SumRowsIntoMatchesNaive) {
  FT_REQUIRE_CUDA();
  struct Case {
    int64_t rows, cols, width;
    DType dt;
  };
  for (const Case& c : {Case{16384, 768, 768, DType::BF16}, Case{4097, 2304, 2304, DType::BF16},
                        Case{333, 37, 37, DType::BF16}, Case{1000, 67, 72, DType::BF16},
                        Case{515, 96, 96, DType::F32}, Case{70, 40, 48, DType::F16}}) {
    const Tensor wide = randn_tensor({c.rows, c.width}, 40 + c.cols, c.dt, Device::cuda());
    const Tensor x = wide.slice(1, 0, c.cols);
    const Tensor out = randn_tensor({c.cols}, 41, DType::F32, Device::cuda());
    const auto want = naive_sum_rows_into(x.to(Device::cpu()), out.to(Device::cpu()));
    ops::sum_rows_into(x, out);
    // fp32 sums of up to 16384 terms in two orders: about 1e-6 relative.
    EXPECT_LT(rel_error(out.to_doubles(), want), 1e-5) << c.rows << " x " << c.cols;
  }
}

TEST(ReduceCuda, BackwardMatchesCpu) {
  FT_REQUIRE_CUDA();
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor dy = randn_tensor({6, 7}, 20, dt);
    const Tensor want = ops::reduce_backward(dy, {6, 9, 7}, 1, 1.0 / 9);
    const Tensor got = ops::reduce_backward(dy.to(Device::cuda()), {6, 9, 7}, 1, 1.0 / 9);
    // One fp32 multiply then one rounding on both sides; the scale is rounded to float on the GPU.
    EXPECT_LT(rel_error(got, want), dt == DType::F32 ? 1e-6 : 4e-3) << dt;
  }
}

}  // namespace
}  // namespace ft
