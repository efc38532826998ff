// The CUDA fused linear cross-entropy (kiln/backend/cuda/kernels/
// linear_cross_entropy.cu) on the GPU: against the op's composite run on the
// GPU (the whole [tokens, vocab] logits), loss and gradients, over the CPU
// suite's cases, vocabularies of several GPU tiles and a token count that
// narrows the tiles; against the CPU kernel; the same bits on every run;
// a bad target as an error; the memory the logits take and the kernel
// does not; and the scratch it declares for the expected peak memory.
#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/kernel.h"
#include "tests/backend/cuda/fused_on_gpu.h"
#include "tests/support/kernel_scratch.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace test;

const LceCase kGpuTiles[] = {
    {300, 64, 20000, "mean", -100, 7},   // 8192-column tiles: two whole, one narrow
    {40000, 32, 5000, "sum", -100, 11},  // so many tokens that a tile is 1664 columns
    {513, 128, 128256, "none", -100, 3}, // Llama 3's vocabulary
};

TEST(LinearCrossEntropyCuda, KernelsAreRegistered) {
  EXPECT_NE(find_kernel(DeviceKind::cuda, "linear_cross_entropy"), nullptr);
  EXPECT_NE(find_kernel(DeviceKind::cuda, "linear_cross_entropy_backward"), nullptr);
}

TEST(LinearCrossEntropyCuda, MatchesCompositeForwardAndBackward) {
  uint64_t seed = 1;
  for (const LceCase& c : lce_cases()) {
    for (DType dt : kFusedDtypes) {
      bool grads = !(c.reduction == "mean" && c.ignored >= c.rows);  // NaN loss
      expect_same("linear_cross_entropy", lce_attrs(c),
                  on_device(lce_inputs(c, dt, seed += 10), kCuda0), tol_for(dt), describe(c, dt),
                  grads);
    }
  }
  const LceCase& c = lce_cases()[3];
  expect_same("linear_cross_entropy", lce_attrs(c),
              on_device(lce_inputs(c, DType::f32, 5, DType::i32), kCuda0), tol_for(DType::f32),
              "i32 targets");
  expect_same("linear_cross_entropy", lce_attrs(c),
              on_device(lce_inputs(c, DType::f16, 5), kCuda0), tol_for(DType::bf16), "f16");
}

TEST(LinearCrossEntropyCuda, SeveralGpuTiles) {
  uint64_t seed = 70;
  for (const LceCase& c : kGpuTiles)
    for (DType dt : {DType::f32, DType::bf16})
      expect_same("linear_cross_entropy", lce_attrs(c),
                  on_device(lce_inputs(c, dt, seed += 10), kCuda0), tol_for(dt), describe(c, dt));
}

TEST(LinearCrossEntropyCuda, MatchesTheCpuKernel) {
  for (const LceCase& c : {lce_cases()[4], kGpuTiles[0]}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(describe(c, dt));
      expect_gpu_matches_cpu(fused("linear_cross_entropy", lce_attrs(c)), lce_inputs(c, dt, 21));
    }
  }
}

TEST(LinearCrossEntropyCuda, SameBitsOnEveryRun) {
  const LceCase& c = kGpuTiles[0];
  expect_same_bits_twice(fused("linear_cross_entropy", lce_attrs(c)),
                         on_device(lce_inputs(c, DType::bf16, 8), kCuda0));
}

TEST(LinearCrossEntropyCuda, BadTargetIsAnError) {
  Tensor h = zeros({4, 8}, DType::f32, kCuda0), w = zeros({10, 8}, DType::f32, kCuda0);
  Tensor t = from_vector(std::vector<int64_t>{1, 2, 10, 3}, {4}).to(kCuda0);
  expect_error([&] { linear_cross_entropy(h, w, t).to(kCPU); }, "out of range");
  // The device is usable afterwards.
  Tensor ok = from_vector(std::vector<int64_t>{1, 2, 9, 3}, {4}).to(kCuda0);
  EXPECT_EQ(linear_cross_entropy(h, w, ok).to(kCPU).item<float>(), linear_cross_entropy(
      h.to(kCPU), w.to(kCPU), ok.to(kCPU)).item<float>());
}

TEST(LinearCrossEntropyCuda, NeverHoldsTheLogits) {
  // 8192 tokens x 32768 classes: 1 GiB of f32 logits; the kernel's block is
  // a quarter of that.
  LceCase c{8192, 64, 32768, "mean", -100, 3};
  std::vector<Tensor> in = on_device(lce_inputs(c, DType::f32, 9), kCuda0);
  std::vector<Tensor> cots = cotangents_for(fused("linear_cross_entropy", lce_attrs(c)), in, 1);
  const int64_t logits = c.rows * c.vocab * 4;
  int64_t fused_peak = grads_peak_bytes(fused("linear_cross_entropy", lce_attrs(c)), in, cots);
  int64_t composite_peak =
      grads_peak_bytes(composite("linear_cross_entropy", lce_attrs(c)), in, cots);
  EXPECT_LT(fused_peak, logits) << "fused peak " << fused_peak;
  EXPECT_GT(composite_peak - fused_peak, logits)
      << "composite peak " << composite_peak << ", fused " << fused_peak;
}

TEST(LinearCrossEntropyCuda, DeclaresTheScratchItTakes) {
  // One GPU tile and several; f32 (dh accumulates in place) and bf16 (G and
  // an f32 dh of their own).
  for (const LceCase& c : {lce_cases()[4], kGpuTiles[0]}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      const std::string label = describe(c, dt);
      expect_declared(scratch_of("linear_cross_entropy", on_device(lce_inputs(c, dt, 5), kCuda0),
                                 lce_attrs(c)),
                      label);
      expect_declared(scratch_of("linear_cross_entropy_backward",
                                 on_device(lce_backward_inputs(c, dt, 5), kCuda0),
                                 {{"ignore_index", c.ignore_index}}),
                      label + " backward");
    }
  }
}

}  // namespace
}  // namespace kiln
