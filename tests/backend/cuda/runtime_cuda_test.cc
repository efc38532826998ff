// The GPU as a kiln device (label cuda; "skipped" without a GPU): host
// round trips of every dtype, strided copies, the caching allocator's
// statistics, reuse and empty_cache, the pinned offload pool (offload and
// reload, strided too, against the CPU), the out-of-memory error, and errors
// of the device surfacing at synchronisation (strict) or at the op (debug).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>

#include "kiln/base/error.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/offload.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/eager.h"
#include "kiln/runtime/tensor.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

constexpr Device kCuda0{DeviceKind::cuda, 0};

using test::error_of;

template <class T>
void expect_round_trip(DType dtype) {
  std::vector<T> host;
  for (int i = 0; i < 1000; ++i) host.push_back(T(float(i % 37) - 18.5f));
  Tensor d = from_vector(host, {10, 100}, kCuda0);
  EXPECT_EQ(d.device(), kCuda0);
  EXPECT_EQ(d.dtype(), dtype);
  std::vector<T> back = d.to_vector<T>();
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(double(float(back[i])), double(float(host[i]))) << dtype_name(dtype) << " at " << i;
}

TEST(CudaRuntime, DescribesTheDevice) {
  std::string d = backend(kCuda0).describe(0);
  EXPECT_NE(d.find("cuda:0: "), std::string::npos) << d;
  EXPECT_NE(d.find("compute capability"), std::string::npos) << d;
  EXPECT_NE(backend(kCuda0).gemm_isa(0).find("cuBLASLt"), std::string::npos);
  std::cout << d << "\n";
}

TEST(CudaRuntime, EveryDtypeRoundTrips) {
  expect_round_trip<float>(DType::f32);
  expect_round_trip<double>(DType::f64);
  expect_round_trip<bf16>(DType::bf16);
  expect_round_trip<f16>(DType::f16);
  expect_round_trip<int32_t>(DType::i32);
  expect_round_trip<int64_t>(DType::i64);
  std::vector<bool> flags;
  for (int i = 0; i < 999; ++i) flags.push_back(i % 3 == 0);
  EXPECT_EQ(from_vector(flags, {999}, kCuda0).to_vector<bool>(), flags);
}

TEST(CudaRuntime, ToDeviceAndBack) {
  Tensor h = test::random_tensor({33, 17}, DType::f32, 7);
  Tensor d = h.to(kCuda0);
  EXPECT_EQ(d.device(), kCuda0);
  Tensor back = d.to(kCPU);
  EXPECT_EQ(back.device(), kCPU);
  EXPECT_EQ(back.to_vector<float>(), h.to_vector<float>());
}

TEST(CudaRuntime, LargeCopiesSpanManyStagingChunks) {
  // 40 MiB: five staging chunks each way.
  std::vector<float> host(size_t(10) << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i % 100003);
  Tensor d = from_vector(host, {int64_t(host.size())}, kCuda0);
  EXPECT_EQ(d.to_vector<float>(), host);
}

TEST(CudaRuntime, ManyUploadsInFlightKeepTheirData) {
  // More uploads than staging chunks, none waited for until the end.
  std::vector<Tensor> ts;
  for (int i = 0; i < 100; ++i) ts.push_back(from_vector<float>({float(i), float(-i)}, {2}, kCuda0));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ts[size_t(i)].to_vector<float>(), (std::vector<float>{float(i), float(-i)}));
}

TEST(CudaRuntime, StridedCopiesThroughViews) {
  Tensor h = test::random_tensor({6, 4}, DType::f32, 3);
  Tensor src = h.to(kCuda0);
  // A transposed view written into a dense tensor, then a strided slice.
  Tensor dst = from_vector(std::vector<float>(24, 0.0f), {4, 6}, kCuda0);
  dst.copy_(src.t());
  EXPECT_EQ(dst.to_vector<float>(), h.t().contiguous().to_vector<float>());
  Tensor part = from_vector(std::vector<float>(8, 0.0f), {2, 4}, kCuda0);
  part.copy_(src.slice(0, 1, 5, 2));
  EXPECT_EQ(part.to_vector<float>(), h.slice(0, 1, 5, 2).contiguous().to_vector<float>());
  // A broadcast source and a strided destination.
  Tensor row = from_vector<float>({1, 2, 3, 4}, {1, 4}, kCuda0);
  Tensor wide = from_vector(std::vector<float>(24, 0.0f), {6, 4}, kCuda0);
  wide.slice(0, 0, 6, 3).copy_(row);
  std::vector<float> want(24, 0.0f);
  for (int r : {0, 3})
    for (int c = 0; c < 4; ++c) want[size_t(r * 4 + c)] = float(c + 1);
  EXPECT_EQ(wide.to_vector<float>(), want);
}

TEST(CudaRuntime, TensorsBetweenDevices) {
  if (backend(kCuda0).device_count() < 2) GTEST_SKIP() << "one CUDA device";
  Tensor h = test::random_tensor({5, 7}, DType::bf16, 11);
  Tensor on1 = h.to(kCuda0).to(Device{DeviceKind::cuda, 1});
  EXPECT_EQ(on1.to_vector<float>(), h.to_vector<float>());
}

TEST(CudaRuntime, AllocatorStatisticsAndReuse) {
  synchronize(kCuda0);
  MemoryStats before = memory_stats(kCuda0);
  {
    Tensor t = from_vector(std::vector<float>(1 << 20), {1 << 20}, kCuda0);
    synchronize(kCuda0);
    EXPECT_GE(memory_stats(kCuda0).allocated, before.allocated + (4 << 20));
    EXPECT_GE(memory_stats(kCuda0).peak_allocated, before.allocated + (4 << 20));
  }
  synchronize(kCuda0);
  MemoryStats freed = memory_stats(kCuda0);
  EXPECT_EQ(freed.allocated, before.allocated);
  EXPECT_GE(freed.reserved, before.allocated + (4 << 20));  // kept in the cache
  {
    Tensor again = from_vector(std::vector<float>(1 << 20), {1 << 20}, kCuda0);
    synchronize(kCuda0);
    EXPECT_EQ(memory_stats(kCuda0).num_system_allocs, freed.num_system_allocs);  // reused
  }
  synchronize(kCuda0);
  empty_cache(kCuda0);
  EXPECT_EQ(memory_stats(kCuda0).reserved, memory_stats(kCuda0).allocated);
  reset_peak_memory(kCuda0);
  EXPECT_EQ(memory_stats(kCuda0).peak_allocated, memory_stats(kCuda0).allocated);
}

TEST(CudaRuntime, OffloadPoolHoldsActivationsInPinnedHostMemory) {
  Tensor h = test::random_tensor({64, 96}, DType::bf16, 12);
  Tensor d = h.to(kCuda0);
  synchronize(kCuda0);
  const MemoryStats before = memory_stats(kCuda0, Pool::offload);
  Tensor out = offload(d);
  Tensor out_t = offload(d.transpose(0, 1));  // a strided input: the copy kernel
  synchronize(kCuda0);
  EXPECT_GE(memory_stats(kCuda0, Pool::offload).allocated, before.allocated + 2 * 64 * 96 * 2);
  EXPECT_EQ(out.device(), kCuda0);
  EXPECT_EQ(reload(out).to_vector<float>(), h.to_vector<float>());
  EXPECT_EQ(reload(out_t).to_vector<float>(), h.transpose(0, 1).contiguous().to_vector<float>());
  out = Tensor(), out_t = Tensor();
  synchronize(kCuda0);
  EXPECT_EQ(memory_stats(kCuda0, Pool::offload).allocated, before.allocated);
}

TEST(CudaRuntime, OutOfMemoryNamesTheRequestAndWhatToTry) {
  // 4 TiB: more than any GPU has.
  std::string e = error_of([] { Storage huge(kCuda0, size_t(1) << 42); });
  for (const char* part : {"CUDA out of memory on cuda:0", "(4398046511104 bytes)", "free of",
                           "reserved", "--activation_checkpoint.mode", "smaller batch"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
  // The device is still usable.
  EXPECT_EQ(from_vector<float>({1, 2}, {2}, kCuda0).to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(CudaRuntime, DebugModeFindsNaNAndInfOnTheDevice) {
  EagerModeGuard debug(EagerMode::debug);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor ones2 = from_vector<float>({1, 1, 1, 1}, {2, 2}, kCuda0);
  std::string e = error_of([&] { matmul(from_vector<float>({1, 2, 3, nan}, {2, 2}, kCuda0), ones2); });
  EXPECT_NE(e.find("debug mode: op 'matmul' (eager op #"), std::string::npos) << e;
  EXPECT_NE(e.find("produced NaN in output 0 (f32[2,2]) at flat index 2"), std::string::npos) << e;
  e = error_of([&] { matmul(from_vector<float>({1, 2, inf, 4}, {2, 2}, kCuda0), ones2); });
  EXPECT_NE(e.find("produced Inf in output 0 (f32[2,2]) at flat index 2"), std::string::npos) << e;
  Tensor fine = matmul(ones2, ones2);
  EXPECT_EQ(fine.to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
  // bf16 and f16 are checked by their bits.
  for (DType t : {DType::bf16, DType::f16, DType::f64}) {
    Tensor a = from_vector<float>({1, 2, 3, inf}, {2, 2}).to(t).to(kCuda0);
    e = error_of([&] { matmul(a, ones2.to(kCPU).to(t).to(kCuda0)); });
    EXPECT_NE(e.find("produced Inf in output 0"), std::string::npos) << dtype_name(t) << ": " << e;
  }
}

// A test op whose CUDA kernel writes through a wild pointer: the launch
// succeeds and the GPU faults later, as a kernel's bug would.
const ir::OpDef& kFault = ops::declare({.name = "test_cuda_fault", .infer = ops::same_as_first});
const KernelRegistrar fault_kernel{DeviceKind::cuda, "test_cuda_fault", {[](const KernelArgs& a) {
                                     TensorRef wild = a.out[0];
                                     wild.data = reinterpret_cast<void*>(uintptr_t(0x100));
                                     find_backend(DeviceKind::cuda)->strided_copy(wild, a.in[0]);
                                   }}};

// A fault leaves the CUDA context unusable, so each runs in a child
// process, which prints the error it got and exits. (The fault is normally
// seen at the synchronisation, "failed on the device"; a GPU that faults
// before the launch is checked reports it at the launch, "failed".)
void report_and_exit(const std::string& e) {
  std::cerr << e << "\n";
  std::exit(e.empty() ? 1 : 0);
}

TEST(CudaRuntimeDeathTest, StrictModeReportsAFaultAtSynchronisationNamingTheOps) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-runs this test up to here
  EXPECT_EXIT(report_and_exit(error_of([] {
                Tensor x = from_vector<float>({1, 2, 3}, {3}, kCuda0);
                synchronize(kCuda0);
                Tensor y = apply1(kFault, {x});  // returns at once
                synchronize(kCuda0);
              })),
              ::testing::ExitedWithCode(0),
              "op 'test_cuda_fault' \\(eager op #[0-9]+\\).* failed.*: CUDA error");
}

TEST(CudaRuntimeDeathTest, DebugModeReportsAFaultAtTheOp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(report_and_exit(error_of([] {
                Tensor x = from_vector<float>({1, 2, 3}, {3}, kCuda0);
                EagerModeGuard debug(EagerMode::debug);
                Tensor y = apply1(kFault, {x});
              })),
              ::testing::ExitedWithCode(0),
              "op 'test_cuda_fault' \\(eager op #[0-9]+\\) failed.*: CUDA error");
}

}  // namespace
}  // namespace kiln
