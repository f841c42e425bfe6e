// Shared main for the test executables: prints whether the GPU tests will run.
#include <gtest/gtest.h>

#include "core/device.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
