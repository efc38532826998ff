// The NCCL process group on a GPU (one rank: the machines lent have one
// GPU): every collective on device buffers against the host group's on the
// same data, host buffers handed to the host group, split, and the
// rank-ordered reduction kernel (which the group runs over n ranks' parts)
// against the host's kiln::dist::reduce_in_order for 3 parts in every
// reducible dtype and op; a compiled step whose collectives run on the
// group, replayed as a CUDA graph that holds them, gives the plain run's
// bits. Multi-rank NCCL needs a machine with several GPUs.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <functional>
#include <vector>

#include "kiln/autograd/grad.h"
#include "kiln/backend/cuda/rank_reduce.h"
#include "kiln/dist/device_group.h"
#include "kiln/dist/local_process_group.h"
#include "kiln/dist/mesh.h"
#include "kiln/dist/reduce.h"
#include "kiln/ops/collectives.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/executable.h"
#include "tests/backend/cuda/against_cpu.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::kCuda0;

// A contiguous tensor's first element in device memory, once its writes are done.
void* device_ptr(const Tensor& t) {
  synchronize(kCuda0);
  const TensorImpl& impl = *t.impl_ptr();
  return static_cast<char*>(impl.storage->data) + impl.offset * int64_t(itemsize(t.dtype()));
}

Tensor random(int64_t n, DType dt, uint64_t seed) {
  Generator g(seed);
  return uniform({n}, -4, 4, g, DType::f32, kCPU).to(dt);
}

std::vector<char> bytes_of(const Tensor& t) {
  Tensor c = t.to(kCPU);
  std::vector<char> b(size_t(c.numel()) * itemsize(c.dtype()));
  const TensorImpl& impl = *c.impl_ptr();
  std::memcpy(b.data(), static_cast<char*>(impl.storage->data) + impl.offset * int64_t(itemsize(c.dtype())),
              b.size());
  return b;
}

class NcclCuda : public ::testing::Test {
 protected:
  std::shared_ptr<dist::ProcessGroup> host =
      std::make_shared<dist::LocalProcessGroup>("world", std::chrono::seconds(60));
  std::shared_ptr<dist::ProcessGroup> nccl = dist::device_group(host, kCuda0);
};

TEST_F(NcclCuda, IsACudaGroupOverTheHostRanks) {
  EXPECT_EQ(nccl->memory(), DeviceKind::cuda);
  EXPECT_EQ(nccl->size(), host->size());
  EXPECT_EQ(nccl->rank(), host->rank());
  EXPECT_EQ(nccl->world_ranks(), host->world_ranks());
}

TEST_F(NcclCuda, CollectivesMatchTheHostGroup) {
  for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::i64}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t n = 1037;
    Tensor in = random(n, dt, 1);
    std::vector<char> host_in = bytes_of(in), host_out(host_in.size());
    auto check = [&](const char* what, const std::function<dist::Work(dist::ProcessGroup&, const void*, void*)>& run) {
      Tensor out = zeros({n}, dt, kCuda0);
      run(*nccl, device_ptr(in.to(kCuda0)), device_ptr(out)).wait();
      std::fill(host_out.begin(), host_out.end(), 0);
      run(*host, host_in.data(), host_out.data()).wait();
      EXPECT_EQ(bytes_of(out), host_out) << what;
    };
    Tensor in_gpu = in.to(kCuda0);
    check("all_reduce sum", [&](auto& g, const void* a, void* b) { return g.all_reduce(a, b, n, dt); });
    check("all_reduce max", [&](auto& g, const void* a, void* b) {
      return g.all_reduce(a, b, n, dt, ReduceOp::max);
    });
    if (is_floating(dt))
      check("all_reduce avg", [&](auto& g, const void* a, void* b) {
        return g.all_reduce(a, b, n, dt, ReduceOp::avg);
      });
    check("all_gather", [&](auto& g, const void* a, void* b) { return g.all_gather(a, b, n, dt); });
    check("reduce_scatter", [&](auto& g, const void* a, void* b) {
      return g.reduce_scatter(a, b, n, dt);
    });
    check("all_to_all", [&](auto& g, const void* a, void* b) {
      std::vector<int64_t> counts{n};
      return g.all_to_all(a, counts, b, counts, dt);
    });
    check("reduce", [&](auto& g, const void* a, void* b) { return g.reduce(a, b, n, dt, 0); });
  }
}

TEST_F(NcclCuda, BroadcastBarrierAndHostBuffers) {
  Tensor t = random(100, DType::f32, 2).to(kCuda0);
  std::vector<char> before = bytes_of(t);
  nccl->broadcast(device_ptr(t), 100, DType::f32, 0).wait();
  EXPECT_EQ(bytes_of(t), before);
  nccl->barrier().wait();
  // Host buffers go to the host group.
  std::vector<float> a{1, 2, 3}, b(3);
  nccl->all_reduce(a.data(), b.data(), 3, DType::f32).wait();
  EXPECT_EQ(b, a);
  // One device buffer and one host buffer is an error.
  test::expect_error([&] { nccl->all_reduce(device_ptr(t), b.data(), 3, DType::f32); },
                     "one buffer is in device memory and the other in host memory");
}

TEST_F(NcclCuda, SplitGivesAWorkingGroup) {
  std::shared_ptr<dist::ProcessGroup> sub = nccl->split(0, 0, "dp");
  EXPECT_EQ(sub->name(), "dp");
  EXPECT_EQ(sub->memory(), DeviceKind::cuda);
  Tensor t = random(64, DType::bf16, 3).to(kCuda0), out = zeros({64}, DType::bf16, kCuda0);
  sub->all_reduce(device_ptr(t), device_ptr(out), 64, DType::bf16).wait();
  EXPECT_EQ(bytes_of(out), bytes_of(t));
}

// A data-parallel step: the loss and the gradient all-reduced over "dp",
// w (donated) updated.
const MeshAxis kDp{"dp", 1};
std::vector<Tensor> reduced_step(const std::vector<Tensor>& a) {
  ValueAndGrad r = value_and_grad([](const std::vector<Tensor>& b) {
    return std::vector<Tensor>{sum(square(tanh(matmul(b[1], b[0]))))};
  })({a[0], a[1]});
  Tensor g = all_reduce(r.grads[0], kDp, ReduceOp::avg);
  return {all_reduce(r.values[0], kDp), a[0] - g * 0.01};
}

// The step's one program (SPMD-safe), and the skinny programs a collective
// otherwise gets of its own, are each captured with their collectives.
TEST_F(NcclCuda, ACompiledStepReplaysItsCollectivesInACudaGraph) {
  dist::set_current_mesh(std::make_shared<dist::DeviceMesh>(nccl, dist::MeshDegrees{}));
  struct Unset {
    ~Unset() { dist::set_current_mesh(nullptr); }
  } unset;
  const Tensor w0 = random(256 * 128, DType::f32, 4).reshape({256, 128});
  constexpr int kSteps = 5;
  for (bool spmd_safe : {true, false}) {
    SCOPED_TRACE(spmd_safe ? "one program" : "skinny collectives");
    auto run = [&](bool replay, std::vector<ReplayStats>* stats) {
      CompileOptions o;
      o.donate = {0};
      o.spmd_safe = spmd_safe;
      o.replay = replay;
      CompiledFunction step = compile(reduced_step, o);
      Tensor w = w0.to(kCuda0);
      std::vector<float> losses;
      for (uint64_t i = 0; i < kSteps; ++i) {
        Tensor x = random(64 * 256, DType::f32, 10 + i).reshape({64, 256}).to(kCuda0);
        std::vector<Tensor> out = step({w, x});
        losses.push_back(out[0].item<float>());
        w = out[1];
      }
      if (stats)
        for (const Executable* p : step.last_programs()) stats->push_back(p->replay_stats());
      losses.push_back(sum(w).item<float>());
      return losses;
    };
    std::vector<ReplayStats> stats;
    const std::vector<float> plain = run(false, nullptr), replayed = run(true, &stats);
    EXPECT_EQ(replayed, plain);
    ASSERT_EQ(stats.size() == 1, spmd_safe) << stats.size() << " programs";
    for (const ReplayStats& s : stats) {
      EXPECT_EQ(s.refused, "");
      EXPECT_EQ(s.plain, 1) << "the first run only";
      EXPECT_EQ(s.replays, kSteps - 1);
      EXPECT_GE(s.recordings, 1);
    }
  }
}

// NCCL keeps a communicator while a CUDA graph holds its collectives, so a
// group drops its graphs when it goes; the programs are captured again on
// the next group and give the same bits. (One rank: its graphs hold no
// NCCL kernels, so the old group's destruction could not hang here.)
TEST_F(NcclCuda, ReplayedStepsGoOnOnANewGroupAfterTheOldOneIsDestroyed) {
  const Tensor w0 = random(256 * 128, DType::f32, 4).reshape({256, 128});
  CompileOptions o;
  o.donate = {0};
  o.replay = true;
  CompiledFunction step = compile(reduced_step, o);
  auto run = [&](std::shared_ptr<dist::ProcessGroup> g) {
    dist::set_current_mesh(std::make_shared<dist::DeviceMesh>(std::move(g), dist::MeshDegrees{}));
    Tensor w = w0.to(kCuda0);
    std::vector<float> losses;
    for (uint64_t i = 0; i < 4; ++i) {
      Tensor x = random(64 * 256, DType::f32, 10 + i).reshape({64, 256}).to(kCuda0);
      std::vector<Tensor> out = step({w, x});
      losses.push_back(out[0].item<float>());
      w = out[1];
    }
    losses.push_back(sum(w).item<float>());
    dist::set_current_mesh(nullptr);
    return losses;
  };
  const std::vector<float> first = run(nccl);
  nccl.reset();  // the last holder: the group goes, dropping its graphs
  EXPECT_EQ(run(dist::device_group(host, kCuda0)), first);
  EXPECT_EQ(step.last_programs().at(0)->replay_stats().refused, "");
}

TEST(RankOrderedReduce, MatchesTheHostReduction) {
  const int parts = 3;
  const int64_t count = 2500;
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
      if (op == ReduceOp::avg && !is_floating(dt)) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + reduce_op_name(op));
      Tensor all = random(parts * count, dt, 9);
      std::vector<char> host = bytes_of(all), want(size_t(count) * itemsize(dt));
      std::vector<const void*> ptrs;
      for (int p = 0; p < parts; ++p) ptrs.push_back(host.data() + size_t(p * count) * itemsize(dt));
      dist::reduce_in_order(want.data(), ptrs, count, dt, op);
      Tensor on_gpu = all.to(kCuda0), out = zeros({count}, dt, kCuda0);
      cuda::rank_ordered_reduce(device_ptr(out), device_ptr(on_gpu), parts, count, count, dt, op,
                                nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(bytes_of(out), want);
    }
  }
}

}  // namespace
}  // namespace kiln
