#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/tensor.h"
#include "tests/test_util.h"

namespace ft {
namespace {

std::vector<float> iota_floats(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = float(i);
  return v;
}

TEST(Tensor, CreationShapeAndStrides) {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::F32);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_TRUE(t.is_contiguous());
  for (float v : t.to_floats()) EXPECT_EQ(v, 0.f);
  Tensor f = Tensor::full({5}, 2.5, DType::BF16);
  for (float v : f.to_floats()) EXPECT_EQ(v, 2.5f);
}

TEST(Tensor, PermuteSliceSelectAreViewsAndContiguousCopies) {
  Tensor t = Tensor::from_floats(iota_floats(24), {2, 3, 4}, DType::F32);
  Tensor p = t.permute({2, 0, 1});  // (4, 2, 3)
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.storage(), t.storage());
  const std::vector<float> pc = p.contiguous().to_floats();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(pc[(a * 2 + b) * 3 + c], float(b * 12 + c * 4 + a));

  Tensor s = t.slice(2, 1, 3);  // (2, 3, 2)
  const std::vector<float> sc = s.to_floats();
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) EXPECT_EQ(sc[(a * 3 + b) * 2 + c], float(a * 12 + b * 4 + c + 1));

  Tensor sel = t.select(1, 2);  // (2, 4)
  EXPECT_EQ(sel.to_floats(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(t.transpose(0, 2).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
}

TEST(Tensor, ViewAndReshape) {
  Tensor t = Tensor::from_floats(iota_floats(12), {3, 4}, DType::F32);
  EXPECT_EQ(t.view({-1, 6}).shape(), (Shape{2, 6}));
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(t.transpose(0, 1).view({12}), Error);  // not viewable: must say so, not copy
  Tensor r = t.transpose(0, 1).reshape({12});
  EXPECT_EQ(r.to_floats()[1], 4.f);
}

TEST(Tensor, ViewOfAStridedSliceSplitsTheContiguousLastDim) {
  // q = qkv[..., 0:C] of a fused (B, T, 3C) buffer, viewed as (B, T, H, D) without a copy.
  const int B = 2, T = 3, C = 8, H = 2, D = 4;
  std::vector<float> v(B * T * 3 * C);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Tensor qkv = Tensor::from_floats(v, {B, T, 3 * C}, DType::F32);
  Tensor k = qkv.slice(2, C, 2 * C).view({B, T, H, D});
  EXPECT_EQ(k.storage(), qkv.storage());
  EXPECT_EQ(k.strides(), (Strides{T * 3 * C, 3 * C, D, 1}));
  EXPECT_EQ(k.to_floats()[D], float(C + D));  // (b=0, t=0, h=1, d=0)
  EXPECT_EQ(k.to_floats()[H * D], float(3 * C + C));  // (b=0, t=1, h=0, d=0)
  EXPECT_EQ(k.view({B, T, C}).strides(), (Strides{T * 3 * C, 3 * C, 1}));
  EXPECT_THROW(k.view({B * T, C}).view({-1}), Error);  // rows are not adjacent: needs a copy
  EXPECT_EQ(k.view({B * T, C}).shape(), (Shape{B * T, C}));  // (B, T) merge: T stride * T = B stride
}

TEST(Tensor, CopyBetweenLayoutsAndDtypeChecks) {
  Tensor a = Tensor::from_floats(iota_floats(6), {2, 3}, DType::F32);
  Tensor b = Tensor::zeros({3, 2}, DType::F32);
  b.transpose(0, 1).copy_(a);
  EXPECT_EQ(b.to_floats(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor wrong = Tensor::zeros({2, 3}, DType::BF16);
  try {
    wrong.copy_(a);
    FAIL() << "copy between dtypes must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[copy] dtypes differ"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::zeros({3, 3}, DType::F32).copy_(a), Error);
}

TEST(Tensor, ErrorsNameTheOpAndShapes) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32);
  try {
    t.slice(1, 2, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[slice]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.permute({0, 0}), Error);
  EXPECT_THROW(t.data<bf16>(), Error);
  EXPECT_THROW(Tensor().shape(), Error);
}

// Round-to-nearest-even conversions against values worked out by hand.
TEST(Half, ConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.f).bits, 0x3F80);
  EXPECT_EQ(float_to_bf16(1.00390625f).bits, 0x3F80);  // halfway 1 + 2^-8: ties to even (down)
  EXPECT_EQ(float_to_bf16(1.01171875f).bits, 0x3F82);  // halfway 1 + 3*2^-8: ties to even (up)
  EXPECT_EQ(float_to_bf16(-2.f).bits, 0xC000);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float_to_f16(1.f).bits, 0x3C00);
  EXPECT_EQ(float_to_f16(65504.f).bits, 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.f).bits, 0x7C00);      // rounds to +inf
  EXPECT_EQ(float_to_f16(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal 2^-24
  EXPECT_EQ(float_to_f16(2.98023223876953125e-08f).bits, 0x0000);  // 2^-25: tie to even (zero)
  EXPECT_EQ(float_to_f16(-0.5f).bits, 0xB800);
  EXPECT_EQ(float_to_f16(1.00048828125f).bits, 0x3C00);  // 1 + 2^-11 halfway: ties to even
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite positive f16 survives a round trip
    ASSERT_EQ(float_to_f16(f16_to_float(f16{uint16_t(h)})).bits, h);
  }
}

TEST(TensorCuda, RoundTripAndStridedCopyOnDevice) {
  FT_REQUIRE_CUDA();
  Tensor a = Tensor::from_floats(iota_floats(24), {2, 3, 4}, DType::F32);
  Tensor d = a.to(Device::cuda());
  EXPECT_TRUE(d.is_cuda());
  Tensor p = d.permute({2, 0, 1}).contiguous();  // strided kernel on the GPU
  EXPECT_EQ(p.to_floats(), a.permute({2, 0, 1}).contiguous().to_floats());
  Tensor back = Tensor::zeros({4, 2, 3}, DType::F32);
  back.copy_(d.permute({2, 0, 1}));  // device -> host with a strided source
  EXPECT_EQ(back.to_floats(), p.to_floats());
  Tensor f = Tensor::full({1000}, -3.25, DType::BF16, Device::cuda());
  for (float v : f.to_floats()) ASSERT_EQ(v, -3.25f);
}

}  // namespace
}  // namespace ft
