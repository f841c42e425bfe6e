// The graph-replay contract of PhiloxState.offset_base (core/philox.h): a CUDA kernel given
// {offset = r, offset_base -> W} draws exactly what it draws given {offset = W + r}. Checked for
// plain dropout and naive attention (forward and backward), whose kernels are ours; flash is
// checked by its own tests. The reference is the plain-offset call (an independent path: no
// device word involved), and a wrong W must change the result (so the test can fail).
#include <gtest/gtest.h>

#include <vector>

#include "ops/attention.h"
#include "ops/dropout.h"
#include "tests/test_util.h"

namespace ft {
namespace {

constexpr uint64_t kSeed = 0x5eedULL;
constexpr uint64_t kBase = (uint64_t{7} << 40) + 12345;  // above 2^32: the counter's high word
constexpr uint64_t kRel = 17;

Tensor device_word(uint64_t v) {
  return Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(v)}, {1}).to(Device::cuda());
}

PhiloxState via_base(const Tensor& word) {
  return PhiloxState{kSeed, kRel, reinterpret_cast<const uint64_t*>(word.data_ptr())};
}

TEST(DropoutOffsetBase, PlainDropoutReadsTheDeviceWord) {
  FT_REQUIRE_CUDA();
  const Tensor x = test::randn_tensor({24, 72}, 1, DType::BF16, Device::cuda());
  const Tensor word = device_word(kBase);
  const Tensor expect = ops::dropout(x, 0.1f, PhiloxState{kSeed, kBase + kRel});
  const Tensor got = ops::dropout(x, 0.1f, via_base(word));
  EXPECT_EQ(got.to_floats(), expect.to_floats());
  const Tensor back = ops::dropout_backward(x, 0.1f, via_base(word));
  EXPECT_EQ(back.to_floats(), expect.to_floats());
  const Tensor wrong = device_word(kBase + 1);
  EXPECT_NE(ops::dropout(x, 0.1f, via_base(wrong)).to_floats(), expect.to_floats());
}

TEST(DropoutOffsetBase, NaiveAttentionReadsTheDeviceWord) {
  FT_REQUIRE_CUDA();
  const int64_t B = 2, T = 40, H = 2, D = 64;
  const Tensor q = test::randn_tensor({B, T, H, D}, 2, DType::BF16, Device::cuda());
  const Tensor k = test::randn_tensor({B, T, H, D}, 3, DType::BF16, Device::cuda());
  const Tensor v = test::randn_tensor({B, T, H, D}, 4, DType::BF16, Device::cuda());
  const Tensor dout = test::randn_tensor({B, T, H, D}, 5, DType::BF16, Device::cuda());
  const Tensor word = device_word(kBase);
  auto run = [&](PhiloxState s) {
    ops::AttentionOptions o;
    o.dropout_p = 0.2f;
    o.philox = s;
    const ops::AttentionForward f = ops::naive_attention_forward(q, k, v, o);
    Tensor dq = Tensor::empty(q.shape(), q.dtype(), q.device());
    Tensor dk = Tensor::empty(q.shape(), q.dtype(), q.device());
    Tensor dv = Tensor::empty(q.shape(), q.dtype(), q.device());
    ops::naive_attention_backward(q, k, v, f, dout, o, dq, dk, dv);
    return std::vector<std::vector<float>>{f.out.to_floats(), dq.to_floats(), dk.to_floats(), dv.to_floats()};
  };
  const auto expect = run(PhiloxState{kSeed, kBase + kRel});
  const auto got = run(via_base(word));
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expect[i]) << "tensor " << i << " (out, dq, dk, dv)";
  const Tensor wrong = device_word(kBase + 1);
  EXPECT_NE(run(via_base(wrong))[0], expect[0]);
}

}  // namespace
}  // namespace ft
