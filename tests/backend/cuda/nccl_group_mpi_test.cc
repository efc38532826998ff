// The NCCL process group's host logic, where it runs without a GPU (ctest
// runs this on 2 and 4 MPI ranks; a lone run is a world of one): NCCL
// loads, rank 0's unique id reaches every rank over the MPI world, every
// rank checks its device before NCCL's bootstrap and, finding none here,
// all ranks fail together with an error naming the ranks and the reason
// (kiln/dist/joint_setup.h), none left waiting; NCCL_COMM_BLOCKING=0 is refused on every rank. On a
// GPU machine the group forms instead (the device tests, nccl_cuda_test.cc,
// check its collectives).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "kiln/backend/nccl/library.h"
#include "kiln/base/error.h"
#include "kiln/dist/device_group.h"
#include "kiln/dist/world.h"
#include "kiln/runtime/backend.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

bool have_gpu() {
  Backend* cuda = find_backend(DeviceKind::cuda);
  return cuda && cuda->device_count() > 0;
}

TEST(NcclLibrary, LoadsAndSaysItsVersion) {
  EXPECT_EQ(nccl::library().version.rfind("NCCL 2.", 0), 0u) << nccl::library().version;
}

TEST(NcclGroup, CpuDevicesKeepTheHostGroup) {
  std::shared_ptr<dist::ProcessGroup> w = dist::world();
  EXPECT_EQ(dist::device_group(w, kCPU), w);
}

TEST(NcclGroup, WithoutAGpuEveryRankFailsNamingThem) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present: the device tests cover the group";
  std::shared_ptr<dist::ProcessGroup> w = dist::world();
  w->set_timeout(30s);  // a rank left behind fails the others quickly
  std::string error;
  try {
    dist::device_group(w, Device{DeviceKind::cuda, 0});
  } catch (const Error& e) {
    error = e.what();
  }
  ASSERT_FALSE(error.empty()) << "made an NCCL group without a GPU";
  std::string every = w->size() == 1 ? "world rank 0" : "world ranks 0";
  for (int r = 1; r < w->size(); ++r) every += ", " + std::to_string(r);
  EXPECT_NE(error.find("Checking each rank's GPU for NCCL on "), std::string::npos) << error;
  EXPECT_NE(error.find(" failed: " + every + ": cuda:0: "), std::string::npos) << error;
  // The world still works: nobody is stuck in NCCL.
  w->barrier().wait();
}

// Non-blocking communicators return before their work is issued, which
// the group's stream order does not follow: every rank refuses them.
TEST(NcclGroup, NonBlockingCommunicatorsAreRefused) {
  std::shared_ptr<dist::ProcessGroup> w = dist::world();
  w->set_timeout(30s);
  ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "0", 1), 0);
  struct Unset {
    ~Unset() { unsetenv("NCCL_COMM_BLOCKING"); }
  } unset;
  test::expect_error([&] { dist::device_group(w, Device{DeviceKind::cuda, 0}); },
                     "NCCL_COMM_BLOCKING=0 makes NCCL's communicators non-blocking");
  w->barrier().wait();
}

}  // namespace
}  // namespace kiln
