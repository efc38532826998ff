// The CUDA grouped matmul (kiln/backend/cuda/kernels/grouped_matmul.cu) on
// the GPU: against the op's composite run on the GPU (every row through
// every expert), forward and gradients, over the CPU suite's cases (empty
// groups, no rows, padding rows) and MoE shapes (64 experts, tiles cut by
// group edges, bf16 on tensor cores); the weight-gradient op; against the
// CPU kernel; the same bits on every run; bad group sizes as errors.
#include <gtest/gtest.h>

#include "kiln/ops/fused_kernels.h"
#include "kiln/runtime/kernel.h"
#include "tests/backend/cuda/fused_on_gpu.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace test;

// Qwen3-MoE-like layers, scaled down: many experts, uneven groups.
const GroupCase kMoeShapes[] = {
    {random_sizes(64, 40, 3), 256, 192},
    {random_sizes(8, 300, 4), 128, 320, 77},
};

TEST(GroupedMatmulCuda, KernelsAreRegistered) {
  EXPECT_NE(find_kernel(DeviceKind::cuda, "grouped_matmul"), nullptr);
  EXPECT_NE(find_kernel(DeviceKind::cuda, "grouped_matmul_weight_grad"), nullptr);
}

TEST(GroupedMatmulCuda, MatchesCompositeForwardAndBackward) {
  uint64_t seed = 1;
  for (const GroupCase& c : group_cases())
    for (bool tw : {true, false})
      for (DType dt : kFusedDtypes)
        expect_same("grouped_matmul", {{"transpose_w", tw}},
                    on_device(group_inputs(c, tw, dt, seed += 10), kCuda0), tol_for(dt),
                    describe(c, tw, dt));
  const GroupCase& c = group_cases()[4];
  expect_same("grouped_matmul", {}, on_device(group_inputs(c, true, DType::f16, 3, DType::i32), kCuda0),
              tol_for(DType::bf16), "f16, i32 sizes");
}

TEST(GroupedMatmulCuda, MoeShapes) {
  uint64_t seed = 300;
  for (const GroupCase& c : kMoeShapes)
    for (bool tw : {true, false})
      for (DType dt : {DType::f32, DType::bf16})
        expect_same("grouped_matmul", {{"transpose_w", tw}},
                    on_device(group_inputs(c, tw, dt, seed += 10), kCuda0), tol_for(dt),
                    describe(c, tw, dt));
}

TEST(GroupedMatmulCuda, WeightGradMatchesComposite) {
  uint64_t seed = 1;
  for (const GroupCase& c : group_cases())
    for (DType dt : kFusedDtypes) {
      std::vector<Tensor> in = on_device(weight_grad_inputs(c, dt, seed += 10), kCuda0);
      expect_same("grouped_matmul_weight_grad", {}, in, tol_for(dt), describe(c, true, dt),
                  in[0].dim(0) > 0);
    }
}

TEST(GroupedMatmulCuda, MatchesTheCpuKernel) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const GroupCase& c = kMoeShapes[1];
    SCOPED_TRACE(describe(c, true, dt));
    expect_gpu_matches_cpu(fused("grouped_matmul", {}), group_inputs(c, true, dt, 21));
  }
}

TEST(GroupedMatmulCuda, SameBitsOnEveryRun) {
  expect_same_bits_twice(fused("grouped_matmul", {}),
                         on_device(group_inputs(kMoeShapes[0], true, DType::bf16, 8), kCuda0));
}

TEST(GroupedMatmulCuda, BadGroupSizesAreErrors) {
  Tensor x = zeros({5, 4}, DType::f32, kCuda0), w = zeros({2, 3, 4}, DType::f32, kCuda0);
  auto run = [&](std::vector<int64_t> sizes) {
    grouped_matmul(x, w, from_vector(sizes, {2}).to(kCuda0)).to_vector<float>();
  };
  expect_error([&] { run({3, 3}); }, "group_sizes[1] is 3 but 2 rows are left");
  expect_error([&] { run({6, -1}); }, "group_sizes[0] is 6");
  EXPECT_NO_THROW(run({5, 0}));
  EXPECT_NO_THROW(run({2, 2}));  // one padding row
}

}  // namespace
}  // namespace kiln
