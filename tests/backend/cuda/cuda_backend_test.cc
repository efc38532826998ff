// Host-side checks of the CUDA backend, which run without a GPU: the
// backend is registered and reports no devices (and why) where there is no
// driver or GPU, using one is a clear error, and the pure parts (the GEMM
// plan and its cache key, the out-of-memory text, which kernels keep a
// program out of CUDA graphs) are right.
#include <gtest/gtest.h>

#include <string>

#include "kiln/backend/cuda/gemm_plan.h"
#include "kiln/backend/cuda/out_of_memory.h"
#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

constexpr Device kCuda0{DeviceKind::cuda, 0};

using test::error_of;

Backend& cuda_backend() {
  Backend* b = find_backend(DeviceKind::cuda);
  if (!b) throw std::runtime_error("the CUDA backend is not registered");
  return *b;
}

TEST(CudaBackend, IsRegistered) {
  EXPECT_NE(find_backend(DeviceKind::cuda), nullptr);
  EXPECT_GE(cuda_backend().device_count(), 0);
}

TEST(CudaBackend, WithoutADeviceSaysWhy) {
  if (cuda_backend().device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(cuda_backend().device_count(), 0);
  EXPECT_FALSE(cuda_backend().no_device_reason().empty());
  std::string e = error_of([] { backend(kCuda0); });
  EXPECT_NE(e.find("device 'cuda:0' does not exist"), std::string::npos) << e;
  EXPECT_NE(e.find(cuda_backend().no_device_reason()), std::string::npos) << e;
}

TEST(CudaBackend, TensorsOnAMissingDeviceAreAClearError) {
  if (cuda_backend().device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  for (auto make : {+[] { from_vector<float>({1, 2}, {2}, kCuda0); },
                    +[] { zeros({2, 3}, DType::f32, kCuda0); },
                    +[] { from_vector<float>({1, 2}, {2}).to(kCuda0); }}) {
    std::string e = error_of(make);
    EXPECT_NE(e.find("device 'cuda:0' does not exist"), std::string::npos) << e;
  }
}

// A CUDA graph holds no host work, so a program holding a kernel that reads
// device values on the host is not captured: all_to_all_v alone, whose row
// counts set what it moves. The other collectives are captured.
TEST(CudaBackend, OnlyAllToAllVKeepsItsProgramOutOfGraphs) {
  EXPECT_FALSE(cuda_backend().records_host_work());
  const Kernel* a2av = find_kernel(DeviceKind::cuda, "all_to_all_v");
  ASSERT_NE(a2av, nullptr);
  ASSERT_NE(a2av->reads_on_host, nullptr);
  EXPECT_NE(std::string(a2av->reads_on_host).find("capacity dispatcher"), std::string::npos);
  for (const char* op : {"matmul", "all_reduce", "all_reduce_start", "collective_wait",
                         "all_gather_cast_start", "reduce_scatter", "all_to_all_start"}) {
    const Kernel* k = find_kernel(DeviceKind::cuda, op);
    ASSERT_NE(k, nullptr) << op;
    EXPECT_EQ(k->reads_on_host, nullptr) << op;
  }
}

// Operands with made-up (aligned) device addresses: planning never reads them.
TensorRef ref(DType t, Shape s, uintptr_t address = 1 << 20) {
  return {reinterpret_cast<void*>(address), t, s, contiguous_strides(s)};
}

cuda::GemmProblem problem(DType t, Shape a, Shape b, Shape c, bool ta, bool tb) {
  return cuda::plan_gemm(ref(t, a), ref(t, b), ref(t, c), ta, tb).problem;
}

TEST(GemmPlan, RowMajorProductIsTheColumnMajorTransposedProduct) {
  // [4,5] @ [5,6]: cuBLASLt computes C^T (6x4) = b^T (6x5) a^T (5x4).
  cuda::GemmPlan plan = cuda::plan_gemm(ref(DType::bf16, {4, 5}), ref(DType::bf16, {5, 6}),
                                        ref(DType::bf16, {4, 6}), false, false);
  const cuda::GemmProblem& p = plan.problem;
  EXPECT_EQ(p.m, 6);
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.k, 5);
  EXPECT_FALSE(p.transpose_first);
  EXPECT_FALSE(p.transpose_second);
  EXPECT_EQ(p.first.rows, 6);
  EXPECT_EQ(p.first.cols, 5);
  EXPECT_EQ(p.first.ld, 6);
  EXPECT_EQ(p.second.rows, 5);
  EXPECT_EQ(p.second.cols, 4);
  EXPECT_EQ(p.second.ld, 5);
  EXPECT_EQ(p.out.rows, 6);
  EXPECT_EQ(p.out.ld, 6);
  EXPECT_EQ(p.batch, 1);
  ASSERT_EQ(plan.launches.size(), 1u);
  EXPECT_EQ(plan.launches[0], (cuda::GemmLaunch{0, 0, 0}));
}

TEST(GemmPlan, TransposesAreFlagsOnTheStoredOperands) {
  // a stored [K,M] = [5,4] with transpose_a, b stored [N,K] = [6,5] with transpose_b.
  cuda::GemmProblem p = problem(DType::f32, {5, 4}, {6, 5}, {4, 6}, true, true);
  EXPECT_TRUE(p.transpose_first);   // kiln's b
  EXPECT_TRUE(p.transpose_second);  // kiln's a
  EXPECT_EQ(p.k, 5);
  EXPECT_EQ(p.first.rows, 5);
  EXPECT_EQ(p.first.cols, 6);
  EXPECT_EQ(p.second.rows, 4);
  EXPECT_EQ(p.second.cols, 5);
}

TEST(GemmPlan, KeyDistinguishesShapesDtypesAndTransposes) {
  cuda::GemmProblem base = problem(DType::bf16, {8, 16}, {16, 32}, {8, 32}, false, false);
  EXPECT_EQ(base, problem(DType::bf16, {8, 16}, {16, 32}, {8, 32}, false, false));
  EXPECT_NE(base, problem(DType::f16, {8, 16}, {16, 32}, {8, 32}, false, false));
  EXPECT_NE(base, problem(DType::f32, {8, 16}, {16, 32}, {8, 32}, false, false));
  EXPECT_NE(base, problem(DType::bf16, {8, 16}, {16, 64}, {8, 64}, false, false));
  EXPECT_NE(base, problem(DType::bf16, {16, 8}, {16, 32}, {8, 32}, true, false));
  EXPECT_NE(base, problem(DType::bf16, {8, 16}, {32, 16}, {8, 32}, false, true));
  EXPECT_NE(problem(DType::bf16, {16, 16}, {16, 16}, {16, 16}, true, false),
            problem(DType::bf16, {16, 16}, {16, 16}, {16, 16}, false, true));
  EXPECT_NE(base, problem(DType::bf16, {3, 8, 16}, {3, 16, 32}, {3, 8, 32}, false, false));
}

TEST(GemmPlan, KeyHoldsTheOperandsAlignment) {
  auto with_a_at = [](uintptr_t address) {
    return cuda::plan_gemm(ref(DType::f32, {8, 16}, address), ref(DType::f32, {16, 32}),
                           ref(DType::f32, {8, 32}), false, false).problem;
  };
  EXPECT_EQ(with_a_at(1 << 20).second.align, 256);
  EXPECT_EQ(with_a_at((1 << 20) + 16).second.align, 16);
  EXPECT_NE(with_a_at(1 << 20), with_a_at((1 << 20) + 16));
}

TEST(GemmPlan, ASharedWeightFoldsTheBatchIntoRows) {
  // [3,8,16] @ [16,32]: one [24,16] @ [16,32] product.
  cuda::GemmPlan plan = cuda::plan_gemm(ref(DType::bf16, {3, 8, 16}), ref(DType::bf16, {16, 32}),
                                        ref(DType::bf16, {3, 8, 32}), false, false);
  EXPECT_EQ(plan.problem.batch, 1);
  EXPECT_EQ(plan.problem.n, 24);
  EXPECT_EQ(plan.problem.second.cols, 24);
  EXPECT_EQ(plan.problem.out.cols, 24);
  EXPECT_EQ(plan.launches.size(), 1u);
}

TEST(GemmPlan, BatchesAreStridedAndBroadcastsHaveStrideZero) {
  // [2,3,4,5] @ [2,3,5,6]: dims merge into a batch of 6.
  cuda::GemmProblem p = problem(DType::f32, {2, 3, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}, false, false);
  EXPECT_EQ(p.batch, 6);
  EXPECT_EQ(p.second.batch_stride, 20);
  EXPECT_EQ(p.first.batch_stride, 30);
  EXPECT_EQ(p.out.batch_stride, 24);
  // [4,5] @ [3,5,6]: a is broadcast over the batch.
  p = problem(DType::f32, {4, 5}, {3, 5, 6}, {3, 4, 6}, false, false);
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.second.batch_stride, 0);
  EXPECT_EQ(p.first.batch_stride, 30);
}

TEST(GemmPlan, MixedBroadcastsLoopTheOuterDims) {
  // [2,1,4,5] @ [1,3,5,6] -> [2,3,4,6]: a batch of 3 (a broadcast), looped twice.
  cuda::GemmPlan plan = cuda::plan_gemm(ref(DType::f32, {2, 1, 4, 5}), ref(DType::f32, {1, 3, 5, 6}),
                                        ref(DType::f32, {2, 3, 4, 6}), false, false);
  EXPECT_EQ(plan.problem.batch, 3);
  EXPECT_EQ(plan.problem.second.batch_stride, 0);
  EXPECT_EQ(plan.problem.first.batch_stride, 30);
  EXPECT_EQ(plan.problem.out.batch_stride, 24);
  ASSERT_EQ(plan.launches.size(), 2u);
  EXPECT_EQ(plan.launches[1], (cuda::GemmLaunch{20, 0, 72}));
}

TEST(GemmPlan, ATransposedViewIsReadInPlaceWithItsFlagFlipped) {
  // a is a [4,5] view of a row-major [5,4] (strides 1, 4): the same problem
  // as the stored [5,4] with transpose_a.
  TensorRef view = ref(DType::f32, {4, 5});
  view.strides = {1, 4};
  EXPECT_TRUE(cuda::gemm_layout_ok(view));
  cuda::GemmPlan plan = cuda::plan_gemm(view, ref(DType::f32, {5, 6}), ref(DType::f32, {4, 6}), false, false);
  EXPECT_EQ(plan.problem, problem(DType::f32, {5, 4}, {5, 6}, {4, 6}, true, false));
  // And a transposed view with the flag set is the plain product.
  plan = cuda::plan_gemm(view, ref(DType::f32, {5, 6}), ref(DType::f32, {4, 6}), true, false);
  EXPECT_FALSE(plan.problem.transpose_second);
}

TEST(GemmPlan, LayoutsCuBlasLtCannotReadAreCopiedFirst) {
  TensorRef expanded = ref(DType::f32, {4, 5});
  expanded.strides = {0, 1};  // one row repeated
  EXPECT_FALSE(cuda::gemm_layout_ok(expanded));
  TensorRef every_other_column = ref(DType::f32, {4, 5});
  every_other_column.strides = {10, 2};
  EXPECT_FALSE(cuda::gemm_layout_ok(every_other_column));
  TensorRef batch_broadcast = ref(DType::f32, {3, 4, 5});
  batch_broadcast.strides = {0, 5, 1};  // a matrix expanded over a batch: read in place
  EXPECT_TRUE(cuda::gemm_layout_ok(batch_broadcast));
  std::string e = error_of([&] {
    cuda::plan_gemm(expanded, ref(DType::f32, {5, 6}), ref(DType::f32, {4, 6}), false, false);
  });
  EXPECT_NE(e.find("is neither row- nor column-major"), std::string::npos) << e;
}

TEST(GemmPlan, ADenseProductPlansAsTheMatmulOfItsViews) {
  // dense_gemm's problem equals plan_gemm's for tensors of the same layout,
  // transposes included; its output dtype may differ from the operands'.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape a = ta ? Shape{7, 3} : Shape{3, 7}, b = tb ? Shape{5, 7} : Shape{7, 5};
      cuda::GemmProblem want = problem(DType::bf16, a, b, {3, 5}, ta, tb);
      cuda::DenseGemm g{.in = DType::bf16, .out = DType::bf16, .transpose_a = ta, .transpose_b = tb,
                        .m = 3, .n = 5, .k = 7, .a = reinterpret_cast<void*>(1 << 20),
                        .lda = a[1], .b = reinterpret_cast<void*>(1 << 20), .ldb = b[1],
                        .c = reinterpret_cast<void*>(1 << 20), .ldc = 5};
      EXPECT_EQ(cuda::plan_dense_gemm(g), want) << ta << tb;
      g.out = DType::f32;
      EXPECT_EQ(cuda::plan_dense_gemm(g).out_dtype, DType::f32);
    }
  }
  // A row stride wider than the row (a tile of a larger matrix).
  cuda::DenseGemm tile{.in = DType::f32, .out = DType::f32, .transpose_b = true, .m = 4, .n = 6,
                       .k = 8, .a = reinterpret_cast<void*>(1 << 20), .lda = 8,
                       .b = reinterpret_cast<void*>((1 << 20) + 64), .ldb = 8,
                       .c = reinterpret_cast<void*>(1 << 20), .ldc = 10};
  cuda::GemmProblem p = cuda::plan_dense_gemm(tile);
  EXPECT_EQ(p.out.ld, 10);
  EXPECT_EQ(p.first.align, 64);
}

TEST(CudaOutOfMemory, NamesTheRequestTheDeviceAndWhatToTry) {
  MemoryStats stats;
  stats.reserved = int64_t(100) << 30;
  stats.allocated = int64_t(100) << 30;
  const cuda::DeviceMemoryInfo info{size_t(1) << 30, size_t(140) << 30};
  std::string m = cuda::out_of_memory_message(1, size_t(3) << 30, info, stats, true);
  for (const char* part : {"CUDA out of memory on cuda:1", "allocating 3.00 GiB (3221225472 bytes)",
                           "1.00 GiB free of 140.00 GiB", "100.00 GiB reserved",
                           "its cache was emptied and the allocation retried",
                           "--activation_checkpoint.mode", "smaller batch"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " in: " << m;
}

// Under a capture nothing is returned to CUDA, so nothing was retried,
// whether or not the cache held anything.
TEST(CudaOutOfMemory, SaysWhenTheAllocationWasNotRetried) {
  MemoryStats stats;
  stats.reserved = stats.allocated = int64_t(100) << 30;
  const cuda::DeviceMemoryInfo info{size_t(1) << 30, size_t(140) << 30};
  std::string empty = cuda::out_of_memory_message(0, 64, info, stats, false);
  stats.reserved = int64_t(120) << 30;
  std::string cached = cuda::out_of_memory_message(0, 64, info, stats, false);
  for (const std::string& m : {empty, cached}) {
    EXPECT_NE(m.find("not retried: a thread capturing a CUDA graph"), std::string::npos) << m;
    EXPECT_EQ(m.find("emptied"), std::string::npos) << m;
  }
  EXPECT_NE(empty.find("nothing cached"), std::string::npos) << empty;
  EXPECT_NE(cached.find("120.00 GiB reserved, 100.00 GiB of it in live tensors (the rest is its "
                        "cache; not retried"),
            std::string::npos)
      << cached;
}

}  // namespace
}  // namespace kiln
