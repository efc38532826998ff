// Replayed programs on the GPU (label cuda; "skipped" without one): each is
// captured once as a CUDA graph and launched as one graph after. A step
// replayed gives the plain run's bits step after step; eager work between
// replays (the shared pool's blocks and the kernels' shared workspace
// changing hands) neither disturbs a graph nor is disturbed by it, as the
// graph's memory is its own; a KV-cache decode replayed token by token
// gives the plain decode's bits. (Which kernels keep a program out of a
// graph: cuda_backend_test.cc; collectives captured: nccl_cuda_test.cc.)
#include <gtest/gtest.h>

#include "kiln/autograd/grad.h"
#include "kiln/models/generate.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/executable.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

constexpr Device kCuda0{DeviceKind::cuda, 0};

// Two layers and their loss: GEMMs (cuBLASLt, with a workspace), fused
// elementwise kernels and reductions.
std::vector<Tensor> loss_of(const std::vector<Tensor>& a) {
  Tensor h = silu(matmul(a[2], a[0], false, true));
  return {sum(square(matmul(h, a[1], false, true) - a[3]))};
}

// One gradient step on (a[0], a[1]) over the batch (a[2], a[3]).
std::vector<Tensor> sgd_step(const std::vector<Tensor>& a) {
  ValueAndGrad r = value_and_grad(loss_of)(a);
  return {r.values[0], a[0] - r.grads[0] * 0.001, a[1] - r.grads[1] * 0.001};
}

CompiledFunction compiled_step(bool replay) {
  CompileOptions o;
  o.donate = {0, 1};
  o.replay = replay;
  return compile(sgd_step, o);
}

Tensor on_gpu(const Shape& shape, uint64_t seed) {
  return test::random_tensor(shape, DType::f32, seed).to(kCuda0);
}

TEST(CudaGraph, ReplayedStepsGiveThePlainRunsBits) {
  CompiledFunction plain = compiled_step(false), replayed = compiled_step(true);
  std::vector<Tensor> wp = {on_gpu({256, 512}, 1), on_gpu({128, 256}, 2)};
  std::vector<Tensor> wr = {on_gpu({256, 512}, 1), on_gpu({128, 256}, 2)};
  std::vector<Tensor> kept;
  std::vector<std::vector<float>> kept_values;
  for (uint64_t step = 0; step < 8; ++step) {
    Tensor x = on_gpu({64, 512}, 10 + step), y = on_gpu({64, 128}, 20 + step);
    std::vector<Tensor> p = plain({wp[0], wp[1], x, y}), r = replayed({wr[0], wr[1], x, y});
    wp = {p[1], p[2]};
    wr = {r[1], r[2]};
    ASSERT_EQ(r[0].to_vector<float>(), p[0].to_vector<float>()) << "step " << step;
    // Eager work between replays: a GEMM larger than the step's (the shared
    // workspace grows and its old buffer is freed), tensors kept across them.
    Tensor big = matmul(on_gpu({1024, 1024}, 30 + step), on_gpu({1024, 1024}, 40 + step), false, true);
    kept.push_back(big);
    kept_values.push_back(big.to_vector<float>());
  }
  EXPECT_EQ(wr[0].to_vector<float>(), wp[0].to_vector<float>());
  EXPECT_EQ(wr[1].to_vector<float>(), wp[1].to_vector<float>());
  for (size_t i = 0; i < kept.size(); ++i)
    EXPECT_EQ(kept[i].to_vector<float>(), kept_values[i]) << "eager result " << i << " was written";
  const ReplayStats s = replayed.last_executable().replay_stats();
  EXPECT_EQ(s.refused, "");
  EXPECT_EQ(s.recordings, 1);
  EXPECT_EQ(s.replays, 7);
  EXPECT_EQ(s.plain, 1);
}

TEST(CudaGraph, ReplayedDecodeGivesThePlainBits) {
  for (const char* family : {"llama3_debug", "qwen3_moe_debug"}) {
    SCOPED_TRACE(family);
    ModelConfig c = model_config(family);
    c.seq_len = 32;
    auto model = build_model(c, DType::f32, 5);
    std::vector<Tensor> moved;
    for (const Tensor& p : model->parameters()) moved.push_back(p.to(kCuda0));
    model->set_parameters(moved);
    KVCacheDecoder plain(*model, 2, 32), replayed(*model, 2, 32, /*replay=*/true);
    const ReplayTotals before = replay_totals();
    const std::vector<std::vector<int32_t>> prompts = {{5, 17, 300}, {2047, 64}};
    ASSERT_EQ(replayed.prefill(prompts), plain.prefill(prompts));
    for (int32_t t = 0; t < 8; ++t) {
      const std::vector<int32_t> next = {int32_t(100 + t), int32_t(200 + t)};
      ASSERT_EQ(replayed.decode(next), plain.decode(next)) << "token " << t;
    }
    const ReplayTotals after = replay_totals();
    EXPECT_EQ(after.recordings - before.recordings, 1) << "one CUDA graph for every token";
    EXPECT_EQ(after.replays - before.replays, 7);
    EXPECT_EQ(after.refused.size(), before.refused.size()) << "nothing refused";
  }
}

}  // namespace
}  // namespace kiln
