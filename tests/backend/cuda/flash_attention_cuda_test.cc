// The CUDA flash attention kernels (kiln/backend/cuda/kernels/
// flash_attention.cu: tensor cores for bf16/f16 with head dims that are
// multiples of 16, scalar otherwise) on the GPU: against the op's composite run on the GPU
// (cuBLASLt products, the masked score matrix), forward and gradients, over
// the CPU suite's cases (tile edges, causal, windows, GQA/MQA, packed and
// interleaved documents, queries at the end of the keys) and training
// shapes with head dims 64, 128 and 256; against the CPU kernel; the
// backward op with an arbitrary delta; the same bits on every run; and the
// memory the composite's score matrix takes and the kernels do not.
#include <gtest/gtest.h>

#include "kiln/ops/fused_kernels.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel.h"
#include "tests/backend/cuda/fused_on_gpu.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace test;

// Shapes as models train: head dims 64/128 (and the 256 limit), several
// query tiles, GQA, documents.
const AttentionCase kTrainingShapes[] = {
    // batch, hq, hkv, sq, sk, d, dv, causal, window, docs
    {2, 8, 2, 700, 700, 128, 128, true, 0, 1},
    {1, 4, 4, 600, 600, 64, 64, true, 256, 0},
    {2, 4, 1, 333, 333, 64, 64, false, 0, 0},
    {1, 2, 1, 150, 150, 256, 256, true, 0, 0},
};

ir::Attrs attrs_of(const AttentionCase& c) {
  return attention_attrs(c.head_dim, c.causal, c.window);
}

TEST(FlashAttentionCuda, KernelsAreRegistered) {
  EXPECT_NE(find_kernel(DeviceKind::cuda, "flash_attention"), nullptr);
  EXPECT_NE(find_kernel(DeviceKind::cuda, "flash_attention_backward"), nullptr);
}

TEST(FlashAttentionCuda, MatchesCompositeForwardAndBackward) {
  uint64_t seed = 1;
  for (const AttentionCase& c : attention_cases())
    for (DType dt : kFusedDtypes)
      expect_same("flash_attention", attrs_of(c),
                  on_device(attention_inputs(c, dt, seed += 10), kCuda0), tol_for(dt),
                  describe(c, dt));
}

TEST(FlashAttentionCuda, TrainingShapes) {
  uint64_t seed = 500;
  for (const AttentionCase& c : kTrainingShapes)
    for (DType dt : {DType::f32, DType::bf16})
      expect_same("flash_attention", attrs_of(c),
                  on_device(attention_inputs(c, dt, seed += 10), kCuda0), tol_for(dt),
                  describe(c, dt));
  const AttentionCase& c = kTrainingShapes[0];
  expect_same("flash_attention", attrs_of(c),
              on_device(attention_inputs(c, DType::f16, 3), kCuda0), tol_for(DType::bf16),
              describe(c, DType::f16));
}

TEST(FlashAttentionCuda, BackwardOpMatchesItsComposite) {
  for (size_t i : {2, 5, 9}) {
    const AttentionCase& c = attention_cases()[i];
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<Tensor> in = on_device(attention_inputs(c, dt, 5), kCuda0);
      expect_same("flash_attention_backward", attrs_of(c),
                  attention_backward_inputs(in, attrs_of(c), 6), tol_for(dt), describe(c, dt),
                  false);
    }
  }
}

TEST(FlashAttentionCuda, MatchesTheCpuKernel) {
  for (const AttentionCase& c : {attention_cases()[9], kTrainingShapes[1]}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(describe(c, dt));
      expect_gpu_matches_cpu(fused("flash_attention", attrs_of(c)), attention_inputs(c, dt, 21));
    }
  }
}

TEST(FlashAttentionCuda, SameBitsOnEveryRun) {
  const AttentionCase& c = kTrainingShapes[0];
  for (DType dt : {DType::f32, DType::bf16})  // scalar and tensor-core kernels
    expect_same_bits_twice(fused("flash_attention", attrs_of(c)),
                           on_device(attention_inputs(c, dt, 8), kCuda0));
}

TEST(FlashAttentionCuda, HoldsNoScoreMatrix) {
  // 4 heads x 2048 x 2048 f32 scores are 64 MiB; q, k, v and their
  // gradients together are 12 MiB.
  const AttentionCase c{1, 4, 4, 2048, 2048, 64, 64, true, 0, 0};
  std::vector<Tensor> in = on_device(attention_inputs(c, DType::f32, 4), kCuda0);
  const int64_t scores = c.q_heads * c.q_len * c.kv_len * 4;
  std::vector<Tensor> cots = cotangents_for(fused("flash_attention", attrs_of(c)), in, 1);
  int64_t fused_peak = grads_peak_bytes(fused("flash_attention", attrs_of(c)), in, cots);
  int64_t composite_peak = grads_peak_bytes(composite("flash_attention", attrs_of(c)), in, cots);
  EXPECT_LT(fused_peak, scores) << "fused peak " << fused_peak;
  EXPECT_GT(composite_peak - fused_peak, scores)
      << "composite peak " << composite_peak << ", fused " << fused_peak;
}

}  // namespace
}  // namespace kiln
