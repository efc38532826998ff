// main() of the device tests (tests/backend/cuda/*_cuda_test.cc, ctest label
// cuda): they run only where a CUDA device is present. Elsewhere the binary
// prints "skipped: no CUDA device" and ctest reports the test as skipped
// (SKIP_REGULAR_EXPRESSION), not passed.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "kiln/runtime/backend.h"

int main(int argc, char** argv) {
  kiln::Backend* cuda = kiln::find_backend(kiln::DeviceKind::cuda);
  if (!cuda || cuda->device_count() == 0) {
    std::cout << "skipped: no CUDA device ("
              << (cuda ? cuda->no_device_reason() : std::string("no CUDA backend")) << ")\n";
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
