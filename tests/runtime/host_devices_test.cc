// KILN_CPU_DEVICES=3 (ctest sets it): three host devices, each with its own
// allocator and queue; values move between them only by .to(device), and an
// op given inputs on two of them is an error naming both.
#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/tensor.h"

namespace kiln {
namespace {

const Device kCpu1{DeviceKind::cpu, 1}, kCpu2{DeviceKind::cpu, 2};

TEST(HostDevices, ThreeAreListed) {
  Backend& b = backend(kCPU);
  ASSERT_EQ(b.device_count(), 3);
  EXPECT_EQ(b.describe(2).rfind("cpu:2: ", 0), 0u) << b.describe(2);
  EXPECT_EQ(b.describe(0).rfind("cpu: ", 0), 0u) << b.describe(0);
  EXPECT_NE(&b.queue(1), &b.queue(2));
  EXPECT_NE(&b.allocator(0), &b.allocator(1));
}

TEST(HostDevices, EachCountsItsOwnMemory) {
  synchronize(kCPU);
  const int64_t before0 = memory_stats(kCPU).allocated, before2 = memory_stats(kCpu2).allocated;
  Tensor t = ones({1024}, DType::f32, kCpu1);
  synchronize(kCpu1);
  EXPECT_GE(memory_stats(kCpu1).allocated, 4096);
  EXPECT_EQ(memory_stats(kCPU).allocated, before0);
  EXPECT_EQ(memory_stats(kCpu2).allocated, before2);
}

TEST(HostDevices, ValuesMoveOnlyByTo) {
  Tensor a = from_vector<float>({1, 2, 3}, {3}, kCpu1);
  Tensor b = from_vector<float>({10, 20, 30}, {3}, kCpu2);
  try {
    (void)(a + b);
    FAIL() << "an op on two devices should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 is on cpu:1 but input 1 is on cpu:2"),
              std::string::npos)
        << e.what();
  }
  Tensor c = a.to(kCpu2) + b;
  EXPECT_EQ(c.device(), kCpu2);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(c.to(kCPU).device(), kCPU);
  EXPECT_EQ(c.to(kCPU).to_vector<float>(), c.to_vector<float>());
}

TEST(HostDevices, ADeviceBeyondTheCountIsAnError) {
  try {
    zeros({2}, DType::f32, Device{DeviceKind::cpu, 3});
    FAIL() << "cpu:3 should not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 'cpu:3' does not exist: 3 found"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln
