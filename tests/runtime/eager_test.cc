// Eager modes: strict runs asynchronously, at most a bounded way ahead of the
// device, and surfaces kernel errors at the next synchronisation; debug runs
// synchronously and names NaN/Inf sources.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/queue.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::error_of;

std::atomic<bool> g_slow_done{false};

// Test-only ops: one whose kernel fails, one whose kernel is slow.
const ir::OpDef& kFailing = ops::declare({.name = "test_failing", .infer = ops::same_as_first});
const ir::OpDef& kSlow = ops::declare({.name = "test_slow", .infer = ops::same_as_first});
const KernelRegistrar test_kernels[] = {
    {DeviceKind::cpu, "test_failing", {[](const KernelArgs&) { fail("index 7 is out of range"); }}},
    {DeviceKind::cpu, "test_slow", {[](const KernelArgs&) {
       std::this_thread::sleep_for(std::chrono::milliseconds(300));
       g_slow_done = true;
     }}},
};

TEST(StrictMode, OpsReturnBeforeKernelsFinish) {
  EagerModeGuard mode(EagerMode::strict);
  g_slow_done = false;
  Tensor y = apply1(kSlow, {zeros({4})});
  EXPECT_FALSE(g_slow_done) << "strict mode should enqueue and return";
  synchronize();
  EXPECT_TRUE(g_slow_done);
}

TEST(StrictMode, KernelErrorSurfacesAtNextSyncNamingTheOp) {
  EagerModeGuard mode(EagerMode::strict);
  Tensor x = ones({4});
  Tensor bad = apply1(kFailing, {x});  // no error yet: it is only queued
  Tensor later = exp(x);               // work after the failure is dropped
  std::string msg = error_of([] { synchronize(); });
  EXPECT_NE(msg.find("op 'test_failing'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 7 is out of range"), std::string::npos) << msg;
  // The error is reported once; the queue works again afterwards.
  EXPECT_EQ(error_of([] { synchronize(); }), "");
  EXPECT_EQ(exp(x).to_vector<float>()[0], std::exp(1.0f));
}

// The host runs ahead of a busy device by at most the queue's byte limit:
// a chain of ops whose buffers a program-order run frees one by one does
// not hold them all while the device catches up.
TEST(StrictMode, RunningAheadHoldsAtMostTheQueuesByteLimit) {
  EagerModeGuard mode(EagerMode::strict);
  const int64_t n = 1 << 20, bytes = n * 4;
  Tensor x = ones({n}), small = zeros({4});
  synchronize();
  const int64_t before = memory_stats(kCPU).allocated;
  reset_peak_memory(kCPU);
  Tensor slow = apply1(kSlow, {small});  // the device is busy while the host goes on
  Tensor y = x;
  for (int i = 0; i < 24; ++i) y = neg(y);
  synchronize();
  // In program order: y's input and output; ahead of the device, the limit.
  EXPECT_LE(memory_stats(kCPU).peak_allocated - before, 2 * bytes + DeviceQueue::kMaxHeldBytes);
  EXPECT_EQ(y.to_vector<float>()[0], 1.0f);
}

TEST(StrictMode, ShapeErrorsAreImmediate) {
  EagerModeGuard mode(EagerMode::strict);
  EXPECT_THROW(add(zeros({2}), zeros({3})), Error);
}

TEST(DebugMode, RunsSynchronously) {
  EagerModeGuard mode(EagerMode::debug);
  g_slow_done = false;
  apply1(kSlow, {zeros({4})});
  EXPECT_TRUE(g_slow_done);
  std::string msg = error_of([] { apply1(kFailing, {zeros({1})}); });
  EXPECT_NE(msg.find("op 'test_failing'"), std::string::npos) << msg;
}

TEST(DebugMode, NanCheckNamesTheOpAndPosition) {
  EagerModeGuard mode(EagerMode::debug);
  Tensor x = from_vector<float>({1, -1, 2}, {3});
  std::string msg = error_of([&] { log(x); });
  EXPECT_NE(msg.find("op 'log'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("flat index 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("eager op #"), std::string::npos) << msg;
  msg = error_of([&] { reciprocal(zeros({2})); });
  EXPECT_NE(msg.find("Inf"), std::string::npos) << msg;
}

TEST(DebugMode, NanInsideAGraphNamesTheNode) {
  EagerModeGuard mode(EagerMode::debug);
  auto f = value_and_grad([](const std::vector<Tensor>& a) { return std::vector<Tensor>{log(a[0] - 2.0)}; });
  std::string msg = error_of([&] { f({scalar(1.0)}); });
  EXPECT_NE(msg.find("op 'log'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("of value_and_grad"), std::string::npos) << msg;
  EXPECT_NE(msg.find("= log(%"), std::string::npos) << msg;
}

TEST(StrictMode, NoNanCheck) {
  EagerModeGuard mode(EagerMode::strict);
  Tensor y = log(from_vector<float>({-1}, {1}));
  EXPECT_TRUE(std::isnan(y.item<float>()));
}

TEST(EagerModes, ParsedFromTheirNames) {
  EXPECT_EQ(parse_eager_mode("debug"), EagerMode::debug);
  EXPECT_EQ(parse_eager_mode("strict"), EagerMode::strict);
  std::string msg = error_of([] { parse_eager_mode("fast"); });
  EXPECT_NE(msg.find("strict, debug or defer_and_fuse"), std::string::npos) << msg;
}

TEST(EagerModes, StrictAndDebugGiveIdenticalBits) {
  Tensor x = from_vector<float>({0.1f, 0.7f, -2.5f, 3.25f}, {4});
  auto run = [&] { return (silu(x) * exp(x) / (x * x + 1.0)).to_vector<float>(); };
  std::vector<float> strict, debug;
  {
    EagerModeGuard m(EagerMode::strict);
    strict = run();
  }
  {
    EagerModeGuard m(EagerMode::debug);
    debug = run();
  }
  EXPECT_EQ(strict, debug);
}

}  // namespace
}  // namespace kiln
