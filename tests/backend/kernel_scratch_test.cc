// The CPU kernels' declared scratch (Kernel::scratch_bytes) against what
// each takes from the pool while it runs (tests/support/kernel_scratch.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/fused_checks.h"
#include "tests/support/kernel_scratch.h"

namespace kiln::test {
namespace {

TEST(KernelScratch, LinearCrossEntropyDeclaresItsLogitsTiles) {
  // Two vocabulary tiles, the second partial.
  const LceCase c{64, 32, 6000, "mean", -100, 3};
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string label = describe(c, dt);
    KernelScratch fwd = scratch_of("linear_cross_entropy", lce_inputs(c, dt, 5), lce_attrs(c));
    EXPECT_GE(fwd.declared, c.rows * 4096 * 4) << label << ": one [rows, 4096] f32 tile";
    expect_declared(fwd, label);
    ir::Attrs attrs{{"ignore_index", c.ignore_index}};
    expect_declared(scratch_of("linear_cross_entropy_backward", lce_backward_inputs(c, dt, 5), attrs),
                    label + " backward");
  }
}

TEST(KernelScratch, FlashAttentionDeclaresItsWidenedInputs) {
  const AttentionCase c{2, 4, 2, 64, 64, 64, 64, true, 0, 0};
  const ir::Attrs attrs = attention_attrs(c.head_dim, c.causal, c.window);
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string label = describe(c, dt);
    std::vector<Tensor> in = attention_inputs(c, dt, 7);
    expect_declared(scratch_of("flash_attention", in, attrs), label);
    expect_declared(scratch_of("flash_attention_backward", attention_backward_inputs(in, attrs, 8), attrs),
                    label + " backward");
  }
}

TEST(KernelScratch, GroupedWeightGradDeclaresItsWidenedInputs) {
  const GroupCase c{{5, 0, 12, 7}, 32, 48, 4};
  for (DType dt : {DType::f32, DType::bf16})
    expect_declared(scratch_of("grouped_matmul_weight_grad", weight_grad_inputs(c, dt, 3), {}),
                    describe(c, false, dt));
}

}  // namespace
}  // namespace kiln::test
