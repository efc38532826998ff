// Replayed runs of compiled programs (kiln/runtime/executable.h) on the CPU,
// whose recordings run the same launches again over the same buffers: the
// results equal plain runs' bit for bit, small inputs are copied in at every
// run, donated and large inputs pick their recording by address, eager work
// between replays never lands in a recording's buffers, what a recording
// allocates is its own (private_memory.h), and the buffers the recordings
// keep are the ones replay_buffer_bytes estimates.
#include <gtest/gtest.h>

#include <thread>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/private_memory.h"
#include "kiln/runtime/recording.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::random_tensor;

std::vector<Tensor> loss_of(const std::vector<Tensor>& a) {
  return {sum(square(matmul(a[1], a[0], false, true) - a[2]))};
}

// One gradient step on w = a[0] over a batch (a[1], a[2]): the loss and w.
std::vector<Tensor> sgd_step(const std::vector<Tensor>& a) {
  ValueAndGrad r = value_and_grad(loss_of)(a);
  return {r.values[0], a[0] - r.grads[0] * 0.01};
}

CompiledFunction compiled_step(bool replay) {
  CompileOptions o;
  o.donate = {0};
  o.replay = replay;
  return compile(sgd_step, o);
}

// With eager tensors made and kept between the replays: a recording's
// buffers are never handed to them, so the replays write none of them.
TEST(Replay, StepsGiveThePlainRunsBits) {
  CompiledFunction plain = compiled_step(false), replayed = compiled_step(true);
  Tensor w_plain = random_tensor({16, 32}, DType::f32, 1);
  Tensor w_replayed = random_tensor({16, 32}, DType::f32, 1);
  const void* buffer = w_replayed.impl().storage->data;
  std::vector<Tensor> kept;
  std::vector<std::vector<float>> kept_values;
  for (uint64_t step = 0; step < 6; ++step) {
    // A new batch each step: copied into the recording's buffers each run.
    Tensor x = random_tensor({8, 32}, DType::f32, 10 + step), y = random_tensor({8, 16}, DType::f32, 20 + step);
    std::vector<Tensor> p = plain({w_plain, x, y}), r = replayed({w_replayed, x, y});
    w_plain = p[1];
    w_replayed = r[1];
    EXPECT_EQ(r[0].to_vector<float>(), p[0].to_vector<float>()) << "step " << step;
    EXPECT_EQ(r[1].to_vector<float>(), p[1].to_vector<float>()) << "step " << step;
    EXPECT_EQ(w_replayed.impl().storage->data, buffer) << "the donated weight stays in place";
    // Sizes of the program's own buffers (its outputs, inputs and intermediates).
    for (const Shape& shape : {Shape{}, Shape{8, 32}, Shape{8, 16}, Shape{16, 32}}) {
      kept.push_back(full(shape, float(step + 7)) * 1.0);
      kept_values.push_back(kept.back().to_vector<float>());
    }
  }
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i].to_vector<float>(), kept_values[i]) << i;
  const ReplayStats s = replayed.last_executable().replay_stats();
  EXPECT_EQ(s.plain, 1) << "the first run runs plainly";
  EXPECT_EQ(s.recordings, 1) << "one set of addresses";
  EXPECT_EQ(s.replays, 5);
  EXPECT_EQ(s.refused, "");
  EXPECT_EQ(&plain.last_executable(), &replayed.last_executable())
      << "one program from the cache, whose plain runs leave its replay counts alone";
}

// What a program's recordings keep, measured in the pool, is what
// replay_buffer_bytes reads from its graph before any is built: its arena,
// its copies of the batch and its own loss output (the weight is donated).
TEST(Replay, TheRecordingsKeepTheEstimatedBuffers) {
  CompiledFunction f = compiled_step(true);
  // Shapes no other test uses: a program of this test's own.
  Tensor w = random_tensor({12, 32}, DType::f32, 1);
  const Tensor x = random_tensor({8, 32}, DType::f32, 2), y = random_tensor({8, 12}, DType::f32, 3);
  w = f({w, x, y})[1];  // the first run runs plainly
  synchronize();
  const int64_t before = memory_stats().allocated;
  w = f({w, x, y})[1];  // recorded
  synchronize();
  const Executable& exe = f.last_executable();
  ASSERT_EQ(exe.replay_stats().recordings, 1);
  const PoolBytes expected = replay_buffer_bytes(exe.graph(), exe.stats().donated, kCPU);
  EXPECT_EQ(memory_stats().allocated - before, expected.device);
  EXPECT_GE(expected.device, 1024 + 384 + 64) << "x, y and the loss at least";
  EXPECT_EQ(expected.offload, 0);
}

// A fused loss's kernels take scratch while recorded: it comes from the
// program's private pool, which keeps it, and the device's pool counts it.
TEST(Replay, TheRecordingsKeepTheirKernelsScratch) {
  CompileOptions o;
  o.replay = true;
  CompiledFunction f = compile(
      [](const std::vector<Tensor>& a) {
        ValueAndGrad r = value_and_grad([](const std::vector<Tensor>& p) {
          return std::vector<Tensor>{linear_cross_entropy(p[0], p[1], p[2])};
        })(a);
        return std::vector<Tensor>{r.values[0], r.grads[0], r.grads[1]};
      },
      o);
  const Tensor h = random_tensor({24, 16}, DType::f32, 1), w = random_tensor({40, 16}, DType::f32, 2);
  std::vector<int32_t> ids(24);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 7 % 40);
  const Tensor targets = from_vector(ids, {24});
  f({h, w, targets});  // the first run runs plainly
  synchronize();
  const int64_t before = memory_stats().allocated;
  f({h, w, targets});  // recorded
  synchronize();
  const Executable& exe = f.last_executable();
  ASSERT_EQ(exe.replay_stats().recordings, 1);
  const PoolBytes expected = replay_buffer_bytes(exe.graph(), exe.stats().donated, kCPU);
  EXPECT_EQ(memory_stats().allocated - before, expected.device);
  std::vector<int64_t> scratch = kernel_scratch_bytes(exe.graph(), kCPU);
  std::erase(scratch, 0);
  EXPECT_EQ(scratch, (std::vector<int64_t>{24 * 40 * 4, 24 * 40 * 4}))
      << "the forward's and the backward's logits tile: one block the two share";
}

// Over 1 MiB and not donated: read where it is, so its address picks the recording.
Tensor large(float value) { return full({(1 << 18) + 1}, value); }

std::vector<Tensor> scale_and_add(const std::vector<Tensor>& a) { return {a[0] * 2.0 + a[1]}; }

TEST(Replay, LargeInputsPickTheirRecordingByAddress) {
  CompileOptions o;
  o.replay = true;
  CompiledFunction f = compile(scale_and_add, o);
  Tensor a1 = large(1), a2 = large(2), b = full({(1 << 18) + 1}, 0.5f);
  ASSERT_GT(a1.numel() * 4, Executable::kCopiedInputBytes);
  auto expect = [&](const Tensor& a, const Tensor& small, float want) {
    std::vector<float> got = f({a, small})[0].to_vector<float>();
    EXPECT_EQ(got.front(), want);
    EXPECT_EQ(got.back(), want);
  };
  expect(a1, b, 2.5f);  // plain
  expect(a2, b, 4.5f);  // recorded
  expect(a1, b, 2.5f);  // recorded
  expect(a2, b, 4.5f);  // replayed
  expect(a1, b, 2.5f);  // replayed
  const ReplayStats s = f.last_executable().replay_stats();
  EXPECT_EQ(s.plain, 1);
  EXPECT_EQ(s.recordings, 2);
  EXPECT_EQ(s.replays, 4);
}

TEST(Replay, RunsPastTheRecordingLimitRunPlainly) {
  CompileOptions o;
  o.replay = true;
  // A program of its own: the program cache shares one between equal graphs.
  CompiledFunction f = compile([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 2.0 - a[1]}; }, o);
  Tensor b = large(0);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < Executable::kMaxRecordings + 2; ++i) inputs.push_back(large(float(i)));
  for (size_t i = 0; i < inputs.size(); ++i)
    ASSERT_EQ(f({inputs[i], b})[0].to_vector<float>()[7], float(2 * i)) << i;
  const ReplayStats s = f.last_executable().replay_stats();
  EXPECT_EQ(s.recordings, int64_t(Executable::kMaxRecordings));
  EXPECT_EQ(s.plain, 2) << "the first run and the one past the limit";
}

// Runs wait on the device queue: the Executable may go meanwhile (the program
// cache let it out, its caller dropped it), and they still run, plain and
// replayed alike.
TEST(Replay, QueuedRunsOutliveTheirExecutable) {
  Tensor w = random_tensor({16, 32}, DType::f32, 1);
  Tensor x = random_tensor({8, 32}, DType::f32, 2), y = random_tensor({8, 16}, DType::f32, 3);
  const std::vector<Tensor> args{w, x, y};
  const std::vector<float> expected = sgd_step(args)[1].to_vector<float>();
  ir::Graph g = prepare_for_device(trace(sgd_step, types_of(args), kCPU)->graph, kCPU);
  for (bool replay : {false, true}) {
    auto exe = std::make_shared<const Executable>(g, kCPU, std::vector<std::pair<int, int>>{});
    if (replay) exe->run(args, true);  // a replayed program's first run runs plainly
    DeviceQueue& queue = backend(kCPU).queue(0);
    queue.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }, "test: busy");
    std::vector<Tensor> out = exe->run(args, replay);
    exe.reset();
    EXPECT_EQ(out[1].to_vector<float>(), expected) << "replay " << replay;
  }
}

TEST(PrivateMemory, AllocationsInAScopeComeFromItsPool) {
  PrivateMemory mine(kCPU);
  const int64_t shared_before = memory_stats(kCPU).allocated;
  const int64_t offload_before = memory_stats(kCPU, Pool::offload).allocated;
  void* first = nullptr;
  std::shared_ptr<Storage> outlives;
  {
    PrivateMemoryScope scope(mine);
    EXPECT_EQ(private_memory(kCPU), &mine);
    {
      Storage s(kCPU, 4096);
      first = s.data;
      EXPECT_EQ(mine.stats().allocated, 4096);
    }
    Storage again(kCPU, 4096);
    EXPECT_EQ(again.data, first) << "freed into the private pool and handed out again";
    outlives = std::make_shared<Storage>(kCPU, 8192);
    Storage offloaded(kCPU, 1024, Pool::offload);
    EXPECT_EQ(mine.pool(/*offload=*/true)->stats().allocated, 1024) << "the offload pool's stand-in";
    // Another thread's allocations are not the scope's.
    std::thread([] { EXPECT_EQ(private_memory(kCPU), nullptr); }).join();
  }
  EXPECT_EQ(private_memory(kCPU), nullptr);
  // What the private pools hold from the device counts as in use there.
  EXPECT_EQ(memory_stats(kCPU).allocated - shared_before, 4096 + 8192);
  EXPECT_EQ(memory_stats(kCPU, Pool::offload).allocated - offload_before, 1024);
  EXPECT_EQ(mine.pool(/*offload=*/true)->stats().allocated, 0);
  outlives.reset();
  EXPECT_EQ(mine.stats().allocated, 0) << "freed after the scope, back to the private pool";
  EXPECT_EQ(memory_stats(kCPU).allocated - shared_before, 4096 + 8192) << "held by the private pool";
}

// The memory a private pool holds counts in the device's shared pool until
// the private pool goes, and in its peak: the measured peak is the device's.
TEST(PrivateMemory, WhatItHoldsCountsInTheDevicesPool) {
  const int64_t before = memory_stats(kCPU).allocated;
  reset_peak_memory(kCPU);
  {
    PrivateMemory mine(kCPU);
    {
      PrivateMemoryScope scope(mine);
      Storage s(kCPU, 1 << 16);
    }
    EXPECT_EQ(memory_stats(kCPU).allocated - before, 1 << 16) << "cached in the private pool";
    Storage shared(kCPU, 1 << 16);  // the shared pool's, beside it
    EXPECT_EQ(memory_stats(kCPU).peak_allocated - before, 2 << 16);
  }
  EXPECT_EQ(memory_stats(kCPU).allocated, before) << "given back with the private pool";
  EXPECT_EQ(memory_stats(kCPU).peak_allocated - before, 2 << 16);
}

TEST(PrivateMemory, ScopesDoNotNest) {
  PrivateMemory a(kCPU), b(kCPU);
  PrivateMemoryScope outer(a);
  EXPECT_THROW(PrivateMemoryScope inner(b), Error);
}

}  // namespace
}  // namespace kiln
