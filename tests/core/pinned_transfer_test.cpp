// PinnedUpload and PinnedReadback (core/pinned_transfer.h) against plain copies: what arrives is
// what was sent, the source may be reused at once, and a read-back returns the value the tensor
// held when it was requested, not a later one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/pinned_transfer.h"
#include "core/tensor.h"
#include "tests/test_util.h"

namespace ft {
namespace {

std::vector<int32_t> iota_from(int32_t first, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<int32_t>(i);
  return v;
}

TEST(PinnedUpload, CopiesIntoACpuTensor) {
  PinnedUpload up;
  Tensor dst = Tensor::zeros({3, 5}, DType::I32);
  const std::vector<int32_t> src = iota_from(7, 15);
  up.upload(dst, src.data());
  EXPECT_EQ(dst.to_vector<int32_t>(), src);
}

TEST(PinnedUpload, RefusesANonContiguousDestination) {
  PinnedUpload up;
  Tensor dst = Tensor::zeros({4, 6}, DType::I32).transpose(0, 1);
  const std::vector<int32_t> src(24, 1);
  EXPECT_THROW(up.upload(dst, src.data()), Error);
}

TEST(PinnedReadback, ReadsACpuTensorAndNeedsARequest) {
  PinnedReadback rb;
  EXPECT_THROW(rb.value(), Error);
  rb.request(Tensor::full({1}, 2.5, DType::F32));
  EXPECT_EQ(rb.value(), 2.5);
  EXPECT_THROW(rb.value(), Error) << "each request is read once";
  EXPECT_THROW(rb.request(Tensor::zeros({2}, DType::F32)), Error) << "one element only";
}

TEST(PinnedUpload, SuccessiveUploadsToTheGpuArriveInOrderAndTheSourceIsFreeAtOnce) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  PinnedUpload up;
  const int64_t n = 1 << 20;
  std::vector<Tensor> dsts;
  std::vector<int32_t> src;
  for (int k = 0; k < 4; ++k) {
    src = iota_from(1000 * k, static_cast<size_t>(n));
    dsts.push_back(Tensor::empty({n}, DType::I32, dev));
    up.upload(dsts.back(), src.data());
    std::fill(src.begin(), src.end(), -1);  // reused at once: the upload must not read it later
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(dsts[k].to_vector<int32_t>(), iota_from(1000 * k, static_cast<size_t>(n))) << k;
  // A larger upload grows the buffer; a smaller one after it still sends only its own bytes.
  Tensor big = Tensor::empty({4 * n}, DType::I32, dev), small = Tensor::zeros({3}, DType::I32, dev);
  up.upload(big, iota_from(5, static_cast<size_t>(4 * n)).data());
  up.upload(small, iota_from(-3, 3).data());
  EXPECT_EQ(big.to_vector<int32_t>(), iota_from(5, static_cast<size_t>(4 * n)));
  EXPECT_EQ(small.to_vector<int32_t>(), iota_from(-3, 3));
}

TEST(PinnedReadback, ReturnsTheValueAtTheRequestNotALaterOne) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  PinnedReadback rb;
  Tensor t = Tensor::full({1}, 3.25, DType::F32, dev);
  rb.request(t);
  t.fill_(-7.0);  // queued after the request: the copy already read 3.25
  EXPECT_EQ(rb.value(), 3.25);
  Tensor i = Tensor::full({1}, 0, DType::I64, dev);
  const int64_t big = (int64_t{1} << 40) + 3;
  PinnedUpload up;
  up.upload(i, &big);
  rb.request(i);  // another dtype: the buffer follows
  EXPECT_EQ(rb.value(), static_cast<double>(big));
}

}  // namespace
}  // namespace ft
