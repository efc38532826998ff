// compile(fn) with compile_in_background (kiln/runtime/compile.h): while a
// signature's program builds on the compile pool, calls run the traced graph
// op by op and give the program's bits; once it is ready, calls run it; a
// program already in a cache tier is loaded at once, without an eager call.
// The pool is held busy by a job of the test's own, so which path runs is
// decided by the test, not by timing.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>

#include "kiln/autograd/grad.h"
#include "kiln/base/profile.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/compile_pool.h"
#include "kiln/runtime/queue.h"
#include "kiln/runtime/region.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::random_tensor;

// A scale no earlier run used, so the program is in no cache tier.
double fresh_scale() { return 1.0 + double(std::random_device()() % 1000000) * 1e-9; }

// A two-block residual MLP's loss and gradients.
TensorFn loss_and_grads(double scale) {
  return [scale](const std::vector<Tensor>& a) {
    ValueAndGrad r = value_and_grad([scale](const std::vector<Tensor>& b) {
      Tensor x = b[0] * scale;
      for (int l = 0; l < 2; ++l) {
        RegionGuard region("layers." + std::to_string(l));
        Tensor h = matmul(x, b[size_t(l) + 1], false, true);
        x = x + matmul(silu(h) * tanh(h), b[size_t(l) + 1]) * 0.1;
      }
      return std::vector<Tensor>{sum(square(x))};
    })(a);
    std::vector<Tensor> out{r.values[0]};
    out.insert(out.end(), r.grads.begin(), r.grads.end());
    return out;
  };
}

std::vector<Tensor> args() {
  return {random_tensor({16, 32}, DType::f32, 1), random_tensor({32, 32}, DType::f32, 2) * (1.0 / 32),
          random_tensor({32, 32}, DType::f32, 3) * (1.0 / 32)};
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> v;
  for (const Tensor& t : ts) v.push_back(t.to_vector<float>());
  return v;
}

// Holds the compile pool's threads until released.
class PoolBlocker {
 public:
  PoolBlocker() {
    for (int i = 0; i < 64; ++i)  // more jobs than the pool has threads
      submit_compile_job([this] {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return released_; });
      });
  }
  ~PoolBlocker() { release(); }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    wait_for_compile_jobs();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

// Programs the calls inside `fn` ran.
size_t programs_run(const std::function<void()>& fn) {
  profile::start();
  fn();
  synchronize();
  profile::Capture c = profile::stop();
  size_t n = 0;
  for (const profile::Event& e : c.events) n += e.category == "program";
  return n;
}

CompileOptions in_background() {
  CompileOptions o;
  o.compile_in_background = true;
  return o;
}

TEST(BackgroundCompile, EagerWhileBuildingThenTheProgramWithTheSameBits) {
  const auto a = args();
  CompiledFunction f = compile(loss_and_grads(fresh_scale()), in_background());
  PoolBlocker blocker;
  std::vector<std::vector<float>> eager, compiled;
  EXPECT_EQ(programs_run([&] { eager = values(f(a)); }), 0u) << "the build waits behind the blocker";
  EXPECT_GT(pending_compile_jobs(), 0);
  blocker.release();
  EXPECT_GT(programs_run([&] { compiled = values(f(a)); }), 0u);
  EXPECT_EQ(eager, compiled);
  EXPECT_EQ(f.num_signatures(), 1u);
  EXPECT_GT(f.last_executable().stats().launches, 0u);
}

// Arguments moved into the call go at their last read while it runs op by
// op, as a step's masters, m and v do in a program that rewrites them. Each
// op holds more than the device queue lets queued work hold, so it runs
// alone and the peak is exact.
TEST(BackgroundCompile, TheEagerRunGivesUpMovedArgumentsAsItGoes) {
  const int n = 4;
  const int64_t bytes = DeviceQueue::kMaxHeldBytes;
  const double scale = fresh_scale();
  CompiledFunction f = compile(
      [scale](const std::vector<Tensor>& a) {
        std::vector<Tensor> out;
        for (const Tensor& x : a) out.push_back(x * scale + 1.0);
        return out;
      },
      in_background());
  std::vector<Tensor> a;
  for (int i = 0; i < n; ++i) a.push_back(full({bytes / 4}, 1.0));
  PoolBlocker blocker;
  synchronize();
  const int64_t before = memory_stats().allocated;
  reset_peak_memory();
  std::vector<Tensor> out;
  EXPECT_EQ(programs_run([&] { out = f(std::move(a)); }), 0u) << "the build waits behind the blocker";
  EXPECT_EQ(memory_stats().allocated, before) << "the results alone";
  // One argument's temporary at a time, and a scalar constant's small block.
  EXPECT_GE(memory_stats().peak_allocated, before + bytes);
  EXPECT_LE(memory_stats().peak_allocated, before + bytes + 4096);
  EXPECT_NEAR(out[0].to_vector<float>()[0], scale + 1.0, 1e-6);
}

TEST(BackgroundCompile, InspectingWaitsForTheBuild) {
  const auto a = args();
  CompiledFunction f = compile(loss_and_grads(fresh_scale()), in_background());
  f(a);
  EXPECT_GT(f.last_executable().stats().launches, 0u);  // built by now, however busy the pool was
}

TEST(BackgroundCompile, ACachedProgramRunsAtOnce) {
  const double scale = fresh_scale();
  const auto a = args();
  const auto foreground = values(compile(loss_and_grads(scale))(a));  // now ready in this process
  CompiledFunction f = compile(loss_and_grads(scale), in_background());
  PoolBlocker blocker;
  std::vector<std::vector<float>> got;
  EXPECT_GT(programs_run([&] { got = values(f(a)); }), 0u) << "no eager call for a cached program";
  EXPECT_EQ(got, foreground);
}

}  // namespace
}  // namespace kiln
