#include <gtest/gtest.h>

#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::randn;
using test::randn_tensor;

TEST(Elementwise, CpuMatchesNaiveReferenceWithBroadcast) {
  const auto av = randn(2 * 3 * 5, 1), bv = randn(5, 2);
  const Tensor a = Tensor::from_floats(av, {2, 3, 5}, DType::F32);
  const Tensor b = Tensor::from_floats(bv, {5}, DType::F32);
  const auto add = ops::add(a, b).to_floats(), sub = ops::sub(a, b).to_floats(), mul = ops::mul(a, b).to_floats();
  for (int i = 0; i < 30; ++i) {
    EXPECT_FLOAT_EQ(add[i], av[i] + bv[i % 5]);
    EXPECT_FLOAT_EQ(sub[i], av[i] - bv[i % 5]);
    EXPECT_FLOAT_EQ(mul[i], av[i] * bv[i % 5]);
  }
  const auto sc = ops::scale(a, -0.5).to_floats();
  for (int i = 0; i < 30; ++i) EXPECT_FLOAT_EQ(sc[i], -0.5f * av[i]);
}

TEST(Elementwise, NonContiguousInputsAndInPlaceAccumulate) {
  const Tensor a = randn_tensor({4, 6}, 3);
  const Tensor at = a.transpose(0, 1);  // (6, 4) view
  const Tensor b = randn_tensor({6, 4}, 4);
  const auto got = ops::add(at, b).to_floats();
  const auto atc = at.contiguous().to_floats(), bv = b.to_floats();
  for (int i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(got[i], atc[i] + bv[i]);
  Tensor acc = b.clone();
  ops::add_(acc, at, 2.0);
  const auto accv = acc.to_floats();
  for (int i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(accv[i], bv[i] + 2.f * atc[i]);
}

TEST(Elementwise, HalfPrecisionRoundsOnce) {
  const auto av = randn(64, 5), bv = randn(64, 6);
  const Tensor a = Tensor::from_floats(av, {64}, DType::BF16), b = Tensor::from_floats(bv, {64}, DType::BF16);
  const auto got = ops::add(a, b).to_floats();
  const auto ar = a.to_floats(), br = b.to_floats();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], bf16_to_float(float_to_bf16(ar[i] + br[i])));
}

TEST(Elementwise, BadInputsNameTheOpAndShapes) {
  const Tensor a = Tensor::zeros({2, 3}, DType::F32);
  try {
    ops::add(a, Tensor::zeros({2}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[add]"), std::string::npos) << m;
    EXPECT_NE(m.find("(2,)"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::mul(a, Tensor::zeros({2, 3}, DType::BF16)), Error);
  EXPECT_THROW(ops::add_(a.transpose(0, 1), Tensor::zeros({3, 2}, DType::F32)), Error);
}

// The widening form of add_: f32 += alpha * (bf16 or f16, widened exactly), one fp32 rounding per
// element, against a float64 reference of the same sum; other mixed pairs stay errors.
TEST(Elementwise, AddIntoF32WidensAHalfSource) {
  const auto dv = randn(300, 21), sv = randn(300, 22);
  for (DType half : {DType::BF16, DType::F16}) {
    const Tensor src = Tensor::from_floats(sv, {300}, half);
    const auto s = src.to_floats();  // the half values, exactly
    for (const Device dev : {Device::cpu(), Device::cuda()}) {
      if (dev.is_cuda() && !cuda_available()) continue;
      Tensor dst = Tensor::from_floats(dv, {300}, DType::F32).to(dev);
      ops::add_(dst, src.to(dev), 0.5);
      const auto got = dst.to_floats();
      for (int i = 0; i < 300; ++i)
        ASSERT_EQ(got[i], static_cast<float>(static_cast<double>(dv[i]) + 0.5 * static_cast<double>(s[i])))
            << half << " " << dev << " " << i;
    }
  }
  EXPECT_THROW(ops::add_(Tensor::zeros({3}, DType::BF16), Tensor::zeros({3}, DType::F32)), Error);
  EXPECT_THROW(ops::add_(Tensor::zeros({3}, DType::F32), Tensor::zeros({4}, DType::BF16)), Error);
}

// add_scaled_: dst (+)= src * scale with the scale a one-element tensor read where it lives, against
// a float64 reference of the same expression (one fp32 rounding: the scale is 0.5, so src * scale
// is exact in fp32 and only the sum rounds); f32 and the widening bf16 -> f32 form, both devices.
TEST(Elementwise, AddScaledReadsItsScaleFromATensor) {
  const auto dv = randn(300, 23), sv = randn(300, 24);
  for (DType src_dtype : {DType::F32, DType::BF16}) {
    const Tensor src = Tensor::from_floats(sv, {300}, src_dtype);
    const auto s = src.to_floats();
    for (const Device dev : {Device::cpu(), Device::cuda()}) {
      if (dev.is_cuda() && !cuda_available()) continue;
      const Tensor scale = Tensor::full({1}, 0.5, DType::F32, dev);
      for (bool accumulate : {true, false}) {
        Tensor dst = Tensor::from_floats(dv, {300}, DType::F32).to(dev);
        ops::add_scaled_(dst, src.to(dev), scale, accumulate);
        const auto got = dst.to_floats();
        for (int i = 0; i < 300; ++i)
          ASSERT_EQ(got[i], static_cast<float>((accumulate ? static_cast<double>(dv[i]) : 0.0) +
                                               0.5 * static_cast<double>(s[i])))
              << src_dtype << " " << dev << " accumulate " << accumulate << " " << i;
      }
    }
  }
  EXPECT_THROW(ops::add_scaled_(Tensor::zeros({3}, DType::F32), Tensor::zeros({3}, DType::F32), Tensor::zeros({2}, DType::F32)),
               Error);
  EXPECT_THROW(ops::add_scaled_(Tensor::zeros({3}, DType::F32), Tensor::zeros({3}, DType::F32), Tensor()), Error);
}

TEST(Cast, AllPairsOnCpuAgreeWithScalarConversions) {
  const Tensor x = Tensor::from_floats({-2.5f, 0.f, 1.f, 3.75f, 100.f}, {5}, DType::F32);
  EXPECT_EQ(ops::cast(x, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 1, 3, 100}));
  EXPECT_EQ(ops::cast(x, DType::F64).to_vector<double>(), (std::vector<double>{-2.5, 0, 1, 3.75, 100}));
  const auto h = ops::cast(x, DType::F16).to_floats();
  EXPECT_EQ(h, x.to_floats());  // all exactly representable in f16
  const Tensor ids = Tensor::from_vector<uint16_t>({0, 50256, 7}, {3});
  EXPECT_EQ(ops::cast(ids, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{0, 50256, 7}));
}

TEST(ElementwiseCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  // Shapes for the scalar kernel (129 columns) and for the 16-byte one (64: whole vectors), with b
  // broadcast over the leading dimensions and b of a's own shape.
  const std::vector<std::pair<Shape, Shape>> shapes = {{{3, 7, 129}, {129}}, {{5, 6, 64}, {6, 64}}, {{5, 6, 64}, {5, 6, 64}}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (const auto& [sa, sb] : shapes) {
      const Tensor a = randn_tensor(sa, 13, dt), b = randn_tensor(sb, 14, dt);
      const Tensor ga = a.to(Device::cuda()), gb = b.to(Device::cuda());
      // Both sides compute in fp32 and round once: results agree exactly.
      EXPECT_EQ(ops::add(ga, gb).to_floats(), ops::add(a, b).to_floats()) << dt << " " << sb.size();
      EXPECT_EQ(ops::sub(ga, gb).to_floats(), ops::sub(a, b).to_floats()) << dt << " " << sb.size();
      EXPECT_EQ(ops::mul(ga, gb).to_floats(), ops::mul(a, b).to_floats()) << dt << " " << sb.size();
    }
    const Tensor a = randn_tensor({3, 7, 129}, 10, dt);
    const Tensor ga = a.to(Device::cuda());
    EXPECT_EQ(ops::sub(ga, ga).to_floats(), ops::sub(a, a).to_floats()) << dt;
    EXPECT_EQ(ops::scale(ga, 0.37).to_floats(), ops::scale(a, 0.37).to_floats()) << dt;
    Tensor acc = ga.clone();
    ops::add_(acc, ga, -1.0);
    for (float v : acc.to_floats()) ASSERT_EQ(v, 0.f);
  }
  const Tensor x = randn_tensor({1000}, 12);
  for (DType to : {DType::BF16, DType::F16, DType::I32}) {
    EXPECT_EQ(ops::cast(x.to(Device::cuda()), to).to_floats(), ops::cast(x, to).to_floats()) << to;
  }
}

}  // namespace
}  // namespace ft
