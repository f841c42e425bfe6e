#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/error.h"
#include "train/device_choice.h"

namespace ft {
namespace {

TEST(DeviceChoice, SaysWhyAConfigCannotRunOnAGpu) {
  TrainConfig c;  // gpt2-small: bf16, head dim 64
  EXPECT_EQ(cuda_incompatibility(c), "");
  c.mixed_precision = MixedPrecision::FP32;  // with flash attention (gpt2-small's default)
  EXPECT_EQ(cuda_incompatibility(c),
            "mixed_precision = fp32 on a GPU needs use_flash_attention: false (the flash kernels take bf16 or f16)");
  c.use_flash_attention = false;  // naive attention runs f32 on a GPU
  EXPECT_EQ(cuda_incompatibility(c), "");
  c.use_flash_attention = true;
  c.mixed_precision = MixedPrecision::BF16;
  c.d_model = 32;
  c.n_heads = 2;
  EXPECT_NE(cuda_incompatibility(c).find("head dim d_model / n_heads = 16"), std::string::npos);
  c.use_flash_attention = false;  // naive attention takes any head dim
  EXPECT_EQ(cuda_incompatibility(c), "");
}

// Flash on a GPU takes head dims 64, 128 and 256 from any d_model / n_heads; others name the head
// dim, the ones it takes and the way out.
TEST(DeviceChoice, FlashHeadDimsOnAGpu) {
  TrainConfig c;  // gpt2-small: bf16, flash
  for (const auto& [d_model, n_heads] : {std::pair<int64_t, int64_t>{768, 12}, {768, 6}, {768, 3}, {512, 2},
                                          {256, 1}, {1024, 4}}) {
    c.d_model = d_model, c.n_heads = n_heads;
    EXPECT_EQ(cuda_incompatibility(c), "") << d_model << " / " << n_heads;
  }
  for (const auto& [d_model, n_heads] : {std::pair<int64_t, int64_t>{768, 24}, {768, 2}, {960, 3}, {512, 1}}) {
    c.d_model = d_model, c.n_heads = n_heads;
    EXPECT_EQ(cuda_incompatibility(c),
              str("use_flash_attention with head dim d_model / n_heads = ", d_model / n_heads,
                  " runs on the CPU only (the CUDA flash kernels take 64, 128 and 256; use_flash_attention: false "
                  "takes any head dim on a GPU)"));
  }
  c.d_model = 768, c.n_heads = 2;  // head dim 384
  c.device = DeviceChoice::Cuda;
  try {
    resolve_device(c);
    ADD_FAILURE() << "device: cuda with flash at head dim 384 must throw";
  } catch (const Error& e) {
    // Without a GPU the error says so first; with one it names the head dim.
    const std::string what = e.what();
    EXPECT_TRUE(what.find("no usable CUDA device") != std::string::npos ||
                what.find("head dim d_model / n_heads = 384") != std::string::npos)
        << what;
  }
}

TEST(DeviceChoice, AutoFallsBackToTheCpuAndCpuIsHonoured) {
  TrainConfig c;
  c.device = DeviceChoice::Cpu;
  EXPECT_TRUE(resolve_device(c).is_cpu());
  c.device = DeviceChoice::Auto;
  c.mixed_precision = MixedPrecision::FP32;
  EXPECT_TRUE(resolve_device(c).is_cpu());  // fp32 + flash cannot run on a GPU, with or without one
  c.device = DeviceChoice::Cuda;
  EXPECT_THROW(resolve_device(c), Error);  // no GPU here, or fp32 + flash on one: an error either way
}

TEST(DeviceChoice, CudaWithFp32AndFlashSaysWhyAndPointsAtNaive) {
  TrainConfig c;
  c.device = DeviceChoice::Cuda;
  c.mixed_precision = MixedPrecision::FP32;
  std::string e;
  try {
    resolve_device(c);
  } catch (const Error& err) {
    e = err.what();
  }
  if (cuda_available())  // without a GPU the error says so instead
    EXPECT_NE(e.find("device = cuda, but mixed_precision = fp32 on a GPU needs use_flash_attention: false"),
              std::string::npos)
        << e;
  else
    EXPECT_NE(e.find("no usable CUDA device"), std::string::npos) << e;
}

TEST(DeviceChoice, Fp32WithNaiveAttentionTakesTheGpu) {
  TrainConfig c;
  c.mixed_precision = MixedPrecision::FP32;
  c.use_flash_attention = false;
  c.device = DeviceChoice::Auto;
  EXPECT_EQ(resolve_device(c).is_cuda(), cuda_available());  // auto: the GPU when there is one
  c.device = DeviceChoice::Cuda;
  if (cuda_available()) {
    EXPECT_TRUE(resolve_device(c).is_cuda());
  }
}

TEST(DeviceChoice, AutoSaysWhyItChoseTheCpu) {
  TrainConfig c;
  c.mixed_precision = MixedPrecision::FP32;  // + flash: the GPU cannot take it
  c.device = DeviceChoice::Auto;
  const Device d = resolve_device(c);
  EXPECT_TRUE(d.is_cpu());
  if (cuda_available())
    EXPECT_EQ(device_note(c, d),
              "device: auto chose the CPU although a GPU is present: mixed_precision = fp32 on a GPU needs "
              "use_flash_attention: false (the flash kernels take bf16 or f16)");
  else
    EXPECT_EQ(device_note(c, d), "");  // no GPU: nothing to explain
  c.device = DeviceChoice::Cpu;  // asked for: nothing to explain either
  EXPECT_EQ(device_note(c, Device::cpu()), "");
  c.device = DeviceChoice::Auto;
  c.use_flash_attention = false;
  EXPECT_EQ(device_note(c, resolve_device(c)), "");  // fp32 + naive: the GPU if any, else no GPU
}

}  // namespace
}  // namespace ft
