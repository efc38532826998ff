#include "kiln/runtime/compile.h"

#include <gtest/gtest.h>

#include "kiln/backend/cpu/fused/fused_kernel.h"
#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/backend.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::random_tensor;

std::vector<Tensor> mlp(const std::vector<Tensor>& a) {
  return {sum(square(silu(matmul(a[0], a[1], false, true)) - 1.0))};
}

TEST(Compile, SameResultsAsEager) {
  Tensor x = random_tensor({4, 8}, DType::f32, 1), w = random_tensor({6, 8}, DType::f32, 2);
  CompiledFunction f = compile(mlp);
  EXPECT_EQ(f({x, w})[0].to_vector<float>(), mlp({x, w})[0].to_vector<float>());
}

TEST(Compile, OneGraphPerSignature) {
  CompiledFunction f = compile([](const std::vector<Tensor>& a) { return std::vector<Tensor>{exp(a[0]) * 2.0}; });
  f({ones({3})});
  f({zeros({3})});
  EXPECT_EQ(f.num_signatures(), 1u);
  f({ones({4})});
  EXPECT_EQ(f.num_signatures(), 2u);
  f({ones({4}, DType::f64)});
  EXPECT_EQ(f.num_signatures(), 3u);
  f({ones({4}, DType::f64)}, "other static argument");
  EXPECT_EQ(f.num_signatures(), 4u);
}

TEST(Compile, ForwardAndBackwardInOneProgram) {
  Tensor x = random_tensor({4, 8}, DType::f32, 3), w = random_tensor({6, 8}, DType::f32, 4);
  auto step = [](const std::vector<Tensor>& a) {
    ValueAndGrad r = value_and_grad(mlp)(a);
    return std::vector<Tensor>{r.values[0], r.grads[0], r.grads[1]};
  };
  CompiledFunction f = compile(step);
  std::vector<Tensor> compiled = f({x, w}), eager = step({x, w});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(compiled[i].to_vector<float>(), eager[i].to_vector<float>()) << i;
  const ir::Graph& g = f.last_executable().graph();
  bool has_matmul = false;
  for (const ir::Node& n : g.nodes()) has_matmul = has_matmul || n.op->name == "matmul";
  EXPECT_TRUE(has_matmul);
  EXPECT_EQ(g.outputs().size(), 3u);
}

TEST(Compile, DonatedInputBufferIsReused) {
  CompileOptions opts;
  opts.donate = {0};
  CompiledFunction f = compile([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] - a[1] * 0.1}; },
                               opts);
  Tensor p = ones({1024}), g = ones({1024});
  void* before = p.impl().storage->data;
  Tensor out = f({p, g})[0];
  EXPECT_EQ(out.impl().storage->data, before);
  EXPECT_FLOAT_EQ(out.to_vector<float>()[0], 0.9f);
  ASSERT_EQ(f.last_executable().stats().donated.size(), 1u);
}

TEST(Compile, ElementwiseChainBecomesOneKernel) {
  CompiledFunction f = compile([](const std::vector<Tensor>& a) {
    Tensor y = a[0];
    y = exp(y) + 1.0;
    y = y * y - 0.5;
    y = tanh(y) / 3.0;
    y = sigmoid(y) * a[0];
    return std::vector<Tensor>{y};
  });
  Tensor x = random_tensor({1000}, DType::f32, 5);
  Tensor y = f({x})[0];
  const Executable& exe = f.last_executable();
  EXPECT_EQ(exe.stats().launches, 1u) << ir::to_text(exe.graph());
  Tensor e = sigmoid(tanh((exp(x) + 1.0) * (exp(x) + 1.0) - 0.5) / 3.0) * x;
  EXPECT_EQ(y.to_vector<float>(), e.to_vector<float>());
}

// A reshape in a program is its input's bytes: no kernel runs for it, also
// where it is returned (its input is written in the output's buffer). One
// copy is left: h lives in the arena for the second product and is also
// returned (as [1, 24]).
TEST(Compile, ReshapesLaunchNothing) {
  auto fn = [](const std::vector<Tensor>& a) {
    Tensor h = matmul(a[0], a[1]);                 // [4, 6]
    Tensor y = matmul(h.reshape({2, 12}), a[2]);   // [2, 3]
    return std::vector<Tensor>{y.reshape({6}), h.reshape({24}).unsqueeze(0)};
  };
  std::vector<Tensor> in{random_tensor({4, 5}, DType::f32, 31), random_tensor({5, 6}, DType::f32, 32),
                         random_tensor({12, 3}, DType::f32, 33)};
  CompiledFunction f = compile(fn);
  std::vector<Tensor> got = f(in), want = fn(in);
  const Executable& exe = f.last_executable();
  EXPECT_EQ(exe.stats().launches, 3u) << ir::to_text(exe.graph());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape());
    EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << i;
  }
}

TEST(Compile, RecompilationIsReported) {
  setenv("KILN_REPORT_RECOMPILES", "1", 1);
  CompiledFunction f = compile([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + 1.0}; },
                               {.name = "add_one"});
  f({ones({2, 3})});
  testing::internal::CaptureStderr();
  f({ones({4, 3})});
  std::string err = testing::internal::GetCapturedStderr();
  unsetenv("KILN_REPORT_RECOMPILES");
  EXPECT_NE(err.find("recompiling add_one"), std::string::npos) << err;
  EXPECT_NE(err.find("input 0 changed from f32[2,3] to f32[4,3]"), std::string::npos) << err;
}

TEST(Compile, ReadingValuesInsideIsAnError) {
  CompiledFunction f = compile([](const std::vector<Tensor>& a) {
    float v = a[0].item<float>();
    return std::vector<Tensor>{a[0] * double(v)};
  });
  EXPECT_THROW(f({ones({1})}), Error);
}

// One fused node with two outputs, each written into a donated input's
// buffer, each also reading the other input (through exp, which the
// generated code gives a loop of its own): right only because the fused
// kernels read every input element before writing any output element.
TEST(Compile, FusedOutputsOverwriteTheirDonatedInputsInPlace) {
  auto fn = [](const std::vector<Tensor>& a) {
    Tensor y0 = a[0] * 0.9 + exp(a[1]);
    return std::vector<Tensor>{y0, a[1] * 0.5 + exp(a[0]) * y0};
  };
  Tensor x = random_tensor({3, 100003}, DType::f32, 21), y = random_tensor({3, 100003}, DType::f32, 22);
  std::vector<Tensor> want = fn({x, y});
  using cpu::fused::CodegenMode;
  for (CodegenMode mode : {CodegenMode::off, CodegenMode::sync}) {
    cpu::fused::set_codegen_mode(mode);
    CompiledFunction f = compile(fn, {.name = "in place", .donate = {0, 1}});
    Tensor xc = x * 1.0, yc = y * 1.0;  // buffers of their own, given away
    const void* buffers[] = {xc.impl().storage->data, yc.impl().storage->data};
    std::vector<Tensor> got = f({xc, yc});
    EXPECT_EQ(f.last_executable().stats().launches, 1u) << ir::to_text(f.last_executable().graph());
    ASSERT_EQ(f.last_executable().stats().donated.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i].impl().storage->data, buffers[i]);
      EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << "output " << i;
    }
  }
  cpu::fused::set_codegen_mode(std::nullopt);
}

}  // namespace
}  // namespace kiln
