// Activation offload's transfers on the GPU (label cuda; "skipped" without
// one): the copies run on the copy stream beside the compute, and a step
// with offload gives the bits of keeping everything, eagerly, compiled,
// compiled and replayed as a CUDA graph (the copy stream forked and joined
// inside it), and under a scan whose loops move the carries one layer
// apart from the compute.
#include <gtest/gtest.h>

#include "kiln/autograd/grad.h"
#include "kiln/autograd/scan.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/region.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using compiler::RematPolicy;

constexpr Device kCuda0{DeviceKind::cuda, 0};
constexpr int kLayers = 4;

// Residual layers, one region each: what offload moves are their GEMMs'
// inputs and outputs.
std::vector<Tensor> stack_loss(const std::vector<Tensor>& a) {
  Tensor x = a[0];
  for (int l = 0; l < kLayers; ++l) {
    RegionGuard region("layers." + std::to_string(l));
    const Tensor& w = a[size_t(l) + 1];
    x = tanh(x + matmul(silu(matmul(x, w)), w, false, true) * 0.5);
  }
  return {mean(square(x))};
}

std::vector<Tensor> scan_loss(const std::vector<Tensor>& a) {
  ScanResult r = scan(
      [](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] + tanh(matmul(x[0], x[1]))}; },
      {a[0]}, {a[1]}, {});
  return {sum(square(r.carries[0]))};
}

TensorFn grads_of(TensorFn loss, RematPolicy p) {
  return [loss, p](const std::vector<Tensor>& a) {
    GradOptions o;
    o.remat = p;
    ValueAndGrad r = value_and_grad(loss, o)(a);
    std::vector<Tensor> out{r.values[0]};
    out.insert(out.end(), r.grads.begin(), r.grads.end());
    return out;
  };
}

void expect_same(const std::vector<Tensor>& want, const std::vector<Tensor>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << what << ", output " << i;
}

std::vector<Tensor> stack_args() {
  std::vector<Tensor> a{test::random_tensor({1024, 512}, DType::f32, 1).to(kCuda0)};
  for (int l = 0; l < kLayers; ++l)
    a.push_back((test::random_tensor({512, 512}, DType::f32, 10 + l) * (1.0 / 512)).to(kCuda0));
  return a;
}

TEST(CudaTransfers, OffloadGivesTheBitsOfKeeping) {
  const std::vector<Tensor> args = stack_args();
  const std::vector<Tensor> none = compile(grads_of(stack_loss, RematPolicy::none))(args);
  expect_same(none, compile(grads_of(stack_loss, RematPolicy::offload))(args), "compiled");
  expect_same(grads_of(stack_loss, RematPolicy::none)(args),
              grads_of(stack_loss, RematPolicy::offload)(args), "eager");
  CompileOptions o;
  o.replay = true;
  CompiledFunction replayed = compile(grads_of(stack_loss, RematPolicy::offload), o);
  for (int run = 0; run < 4; ++run) expect_same(none, replayed(args), "replayed");
  const ReplayStats s = replayed.last_executable().replay_stats();
  EXPECT_EQ(s.refused, "");
  EXPECT_EQ(s.recordings, 1);
  EXPECT_EQ(s.replays, 3) << "the copy stream's fork and join are captured";
}

TEST(CudaTransfers, ScanMovesItsCarriesOneLayerApart) {
  const std::vector<Tensor> args{test::random_tensor({256, 256}, DType::f32, 1).to(kCuda0),
                                 (test::random_tensor({6, 256, 256}, DType::f32, 2) * 0.05).to(kCuda0)};
  const std::vector<Tensor> none = compile(grads_of(scan_loss, RematPolicy::none))(args);
  expect_same(none, compile(grads_of(scan_loss, RematPolicy::offload))(args), "compiled");
  CompileOptions o;
  o.replay = true;
  CompiledFunction replayed = compile(grads_of(scan_loss, RematPolicy::offload), o);
  for (int run = 0; run < 3; ++run) expect_same(none, replayed(args), "replayed");
  EXPECT_EQ(replayed.last_executable().replay_stats().replays, 2);
}

}  // namespace
}  // namespace kiln
