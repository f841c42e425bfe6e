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

// add_ and add_scaled_ on CUDA take 16-byte vectors of dst where its length and both pointers
// allow, else one element a thread. Both must give every element the float64 sum rounded once (to
// within the one fp32 rounding of alpha * src inside it) and agree with each other bit for bit:
// 1203 elements run element by element, their first 1200 (a view of the same memory) as vectors,
// and a view one element in as elements again (src off its vector boundary).
TEST(ElementwiseCuda, AxpbyVectorsMatchElementByElement) {
  FT_REQUIRE_CUDA();
  const auto dv = randn(1203, 31), sv = randn(1203, 32);
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::F32, DType::F32}, {DType::F32, DType::BF16}, {DType::F32, DType::F16}, {DType::BF16, DType::BF16}, {DType::F16, DType::F16}};
  for (const auto& [dst_dtype, src_dtype] : pairs) {
    const Tensor src = Tensor::from_floats(sv, {1203}, src_dtype).to(Device::cuda());
    const Tensor dst0 = Tensor::from_floats(dv, {1203}, dst_dtype).to(Device::cuda());
    const auto s = src.to_floats(), d = dst0.to_floats();
    const Tensor scale = Tensor::full({1}, 0.37, DType::F32, Device::cuda());
    for (int form = 0; form < 3; ++form) {  // add_ with alpha, add_scaled_ accumulating, add_scaled_ over
      const bool accumulate = form != 2;
      auto apply = [&](const Tensor& out, const Tensor& in) {
        if (form == 0) ops::add_(out, in, 0.37);
        else ops::add_scaled_(out, in, scale, accumulate);
      };
      Tensor whole = dst0.clone(), vec = dst0.clone(), off = dst0.clone();
      apply(whole, src);                                                // 1203: element by element
      apply(vec.slice(0, 0, 1200), src.slice(0, 0, 1200));              // 1200: vectors
      apply(off.slice(0, 1, 1201), src.slice(0, 1, 1201));              // off the vector boundary
      const auto w = whole.to_floats(), v = vec.to_floats(), o = off.to_floats();
      const double tol = dst_dtype == DType::F32 ? 1e-6 : (dst_dtype == DType::BF16 ? 8e-3 : 1e-3);
      for (int i = 0; i < 1203; ++i) {
        const double want = (accumulate ? static_cast<double>(d[i]) : 0.0) + 0.37 * static_cast<double>(s[i]);
        ASSERT_NEAR(w[i], want, tol * (1.0 + std::abs(want))) << dst_dtype << " " << src_dtype << " form " << form << " " << i;
        if (i < 1200) ASSERT_EQ(v[i], w[i]) << dst_dtype << " " << src_dtype << " form " << form << " " << i;
        if (i >= 1 && i < 1201) ASSERT_EQ(o[i], w[i]) << dst_dtype << " " << src_dtype << " form " << form << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ft
