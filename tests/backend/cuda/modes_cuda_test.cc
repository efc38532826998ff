// Every eager mode on a CUDA device (label cuda; "skipped" without a GPU):
// defer_and_fuse and compile(fn) give the bits strict mode gives on the
// same GPU, for a small MLP's loss and gradients, and strict CUDA is close
// to the CPU. Needs the CUDA kernels of every op the MLP and its backward
// use, and of the fused kernels the compiler makes of them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/autograd/grad.h"
#include "kiln/autograd/scan.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/defer.h"
#include "kiln/runtime/eager.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

constexpr Device kCuda0{DeviceKind::cuda, 0};

// Loss of a two-layer MLP, then the gradient of every argument.
std::vector<Tensor> mlp_step(const std::vector<Tensor>& args) {
  auto loss = [](const std::vector<Tensor>& a) {
    Tensor h = silu(matmul(a[0], a[1], false, true));
    Tensor out = matmul(h, a[2], false, true);
    return std::vector<Tensor>{mean(square(out - a[3]))};
  };
  ValueAndGrad r = value_and_grad(loss)(args);
  return {r.values[0], r.grads[0], r.grads[1], r.grads[2]};
}

std::vector<Tensor> inputs(DType t, Device d) {
  return {test::random_tensor({16, 32}, t, 1).to(d), test::random_tensor({64, 32}, t, 2).to(d),
          test::random_tensor({8, 64}, t, 3).to(d), test::random_tensor({16, 8}, t, 4).to(d)};
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> v;
  for (const Tensor& t : ts) {
    EXPECT_EQ(t.device(), kCuda0);
    v.push_back(t.to_vector<float>());
  }
  return v;
}

template <class F>
std::vector<std::vector<float>> in_mode(EagerMode m, F f) {
  EagerModeGuard guard(m);
  return values(f());
}

TEST(CudaModes, DeferAndFuseEqualsStrictBitForBit) {
  for (DType t : {DType::f32, DType::bf16}) {
    std::vector<Tensor> args = inputs(t, kCuda0);
    auto strict = in_mode(EagerMode::strict, [&] { return mlp_step(args); });
    reset_defer_stats();
    auto deferred = in_mode(EagerMode::defer_and_fuse, [&] { return mlp_step(args); });
    EXPECT_GT(defer_stats().flushes, 0);
    EXPECT_EQ(strict, deferred) << dtype_name(t);
  }
}

TEST(CudaModes, CompiledEqualsStrictBitForBit) {
  for (DType t : {DType::f32, DType::bf16}) {
    std::vector<Tensor> args = inputs(t, kCuda0);
    auto strict = in_mode(EagerMode::strict, [&] { return mlp_step(args); });
    CompiledFunction f = compile(mlp_step);
    auto compiled = in_mode(EagerMode::strict, [&] { return f(args); });
    EXPECT_EQ(strict, compiled) << dtype_name(t);
    EXPECT_EQ(in_mode(EagerMode::strict, [&] { return f(args); }), compiled) << "second call";
  }
}

TEST(CudaModes, DebugEqualsStrict) {
  std::vector<Tensor> args = inputs(DType::f32, kCuda0);
  auto strict = in_mode(EagerMode::strict, [&] { return mlp_step(args); });
  EXPECT_EQ(in_mode(EagerMode::debug, [&] { return mlp_step(args); }), strict);
}

TEST(CudaModes, StrictCudaIsCloseToTheCpu) {
  std::vector<Tensor> cpu = mlp_step(inputs(DType::f32, kCPU));
  auto gpu = in_mode(EagerMode::strict, [&] { return mlp_step(inputs(DType::f32, kCuda0)); });
  for (size_t i = 0; i < cpu.size(); ++i) {
    std::vector<float> want = cpu[i].to_vector<float>();
    ASSERT_EQ(gpu[i].size(), want.size());
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(gpu[i][j], want[j], 1e-5 + 1e-4 * std::abs(want[j])) << "output " << i << " at " << j;
  }
}

// A scan (the decoder stack's loop op) and the loop it stands for: on the
// GPU the same bits, as on the CPU, and close to the CPU's values.
std::vector<Tensor> scan_step(const std::vector<Tensor>& args, bool as_scan) {
  auto cell = [](const Tensor& h, const Tensor& w) { return h + tanh(matmul(h, w)); };
  auto loss = [&](const std::vector<Tensor>& a) {
    Tensor h = a[0];
    if (as_scan) {
      h = scan([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{cell(x[0], x[1])}; },
               {a[0]}, {a[1]}, {})
              .carries[0];
    } else {
      for (int64_t i = 0; i < a[1].shape()[0]; ++i) h = cell(h, a[1].slice(0, i, i + 1).squeeze(0));
    }
    return std::vector<Tensor>{sum(h * h)};
  };
  ValueAndGrad r = value_and_grad(loss)(args);
  return {r.values[0], r.grads[0], r.grads[1]};
}

TEST(CudaModes, ScanEqualsItsLoopBitForBitAndIsCloseToTheCpu) {
  auto scan_inputs = [](Device d) {
    return std::vector<Tensor>{test::random_tensor({4, 8}, DType::f32, 5).to(d),
                               (test::random_tensor({3, 8, 8}, DType::f32, 6) * 0.3).to(d)};
  };
  auto scanned = in_mode(EagerMode::strict, [&] { return scan_step(scan_inputs(kCuda0), true); });
  auto looped = in_mode(EagerMode::strict, [&] { return scan_step(scan_inputs(kCuda0), false); });
  EXPECT_EQ(scanned, looped);
  std::vector<Tensor> cpu = scan_step(scan_inputs(kCPU), true);
  for (size_t i = 0; i < cpu.size(); ++i) {
    std::vector<float> want = cpu[i].to_vector<float>();
    ASSERT_EQ(scanned[i].size(), want.size());
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(scanned[i][j], want[j], 1e-5 + 1e-4 * std::abs(want[j])) << "output " << i << " at " << j;
  }
}

}  // namespace
}  // namespace kiln
