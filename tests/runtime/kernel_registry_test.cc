// The kernel registry: one kernel per (device, op), the highest priority
// winning in whatever order variants register.
#include <gtest/gtest.h>

#include "kiln/runtime/kernel.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

void first(const KernelArgs&) {}
void second(const KernelArgs&) {}
void third(const KernelArgs&) {}

TEST(KernelRegistry, TheHighestPriorityWinsInAnyOrder) {
  register_kernel(DeviceKind::cpu, "registry_test_up", {first}, 0);
  register_kernel(DeviceKind::cpu, "registry_test_up", {second}, 1);
  EXPECT_EQ(find_kernel(DeviceKind::cpu, "registry_test_up")->fn, &second);
  register_kernel(DeviceKind::cpu, "registry_test_down", {second}, 1);
  register_kernel(DeviceKind::cpu, "registry_test_down", {first}, 0);
  EXPECT_EQ(find_kernel(DeviceKind::cpu, "registry_test_down")->fn, &second);
}

TEST(KernelRegistry, TheSamePriorityTwiceIsAnError) {
  register_kernel(DeviceKind::cpu, "registry_test_twice", {first}, 0);
  test::expect_error([] { register_kernel(DeviceKind::cpu, "registry_test_twice", {third}, 0); },
                     "kernel for op 'registry_test_twice' registered twice");
  EXPECT_EQ(find_kernel(DeviceKind::cpu, "registry_test_twice")->fn, &first);
}

}  // namespace
}  // namespace kiln
