#include <gtest/gtest.h>

#include "core/error.h"
#include "train/device_choice.h"

namespace ft {
namespace {

TEST(DeviceChoice, SaysWhyAConfigCannotRunOnAGpu) {
  TrainConfig c;  // gpt2-small: bf16, head dim 64
  EXPECT_EQ(cuda_incompatibility(c), "");
  c.mixed_precision = MixedPrecision::FP32;
  EXPECT_NE(cuda_incompatibility(c).find("mixed_precision = fp32"), std::string::npos);
  c.mixed_precision = MixedPrecision::BF16;
  c.d_model = 32;
  c.n_heads = 2;
  EXPECT_NE(cuda_incompatibility(c).find("head dim d_model / n_heads = 16"), std::string::npos);
  c.use_flash_attention = false;  // naive attention takes any head dim
  EXPECT_EQ(cuda_incompatibility(c), "");
}

TEST(DeviceChoice, AutoFallsBackToTheCpuAndCpuIsHonoured) {
  TrainConfig c;
  c.device = DeviceChoice::Cpu;
  EXPECT_TRUE(resolve_device(c).is_cpu());
  c.device = DeviceChoice::Auto;
  c.mixed_precision = MixedPrecision::FP32;
  EXPECT_TRUE(resolve_device(c).is_cpu());  // fp32 cannot run on a GPU, with or without one
  c.device = DeviceChoice::Cuda;
  EXPECT_THROW(resolve_device(c), Error);  // no GPU here, or fp32 on one: an error either way
}

}  // namespace
}  // namespace ft
