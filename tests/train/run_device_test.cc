// training.device to a device (KILN_CPU_DEVICES=3, which ctest sets): a bare
// kind is the local rank's device, host devices wrap around, an index is
// taken as given, and one that does not exist is an error naming the setting.
#include "kiln/train/run_device.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln::train {
namespace {

Device cpu(int i) { return Device{DeviceKind::cpu, i}; }

TEST(RunDevice, ABareKindIsTheLocalRanksDevice) {
  EXPECT_EQ(run_device("cpu", 0, 1), cpu(0));
  EXPECT_EQ(run_device("cpu", 2, 3), cpu(2));
  EXPECT_EQ(run_device("cpu", 4, 5), cpu(1));  // host devices are shared: 4 mod 3
}

TEST(RunDevice, AnIndexIsTakenAsGiven) {
  EXPECT_EQ(run_device("cpu:2", 0, 2), cpu(2));
  EXPECT_EQ(run_device("cpu:0", 1, 2), cpu(0));
}

void expect_error(const std::string& setting, const std::string& message) {
  try {
    run_device(setting, 0, 1);
    ADD_FAILURE() << setting << " should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(RunDevice, ErrorsNameTheSetting) {
  expect_error("cpu:3", "training.device = cpu:3: device 'cpu:3' does not exist: 3 found");
  expect_error("gpu", "training.device: unknown device 'gpu': use cpu, cuda or cuda:N");
  expect_error("cuda:-1", "bad device index in 'cuda:-1'");
  Backend* cuda = find_backend(DeviceKind::cuda);
  if (!cuda || cuda->device_count() == 0) expect_error("cuda", "training.device = cuda: ");
}

}  // namespace
}  // namespace kiln::train
