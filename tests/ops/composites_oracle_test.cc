// Whole functions against PyTorch (single ops are in ops_oracle_test): the
// SwiGLU MLP module, forward and gradients.
#include <gtest/gtest.h>

#include "kiln/autograd/grad.h"
#include "kiln/nn/mlp.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "tests/support/oracle.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

TEST(CompositesVsTorch, SwigluMlpForwardAndGradients) {
  const test::SafeTensors& ref = test::oracle_file("functions");
  const char* names[] = {"x", "w_gate", "w_up", "w_down"};
  std::vector<Tensor> args;
  for (const char* n : names) args.push_back(ref.get(std::string("swiglu.") + n));
  Tensor cot = ref.get("swiglu.cot");
  nn::SwiGLU mlp(args[0].dim(-1), args[1].dim(0), DType::f64);
  auto f = value_and_grad([&](const std::vector<Tensor>& a) {
    mlp.gate_proj.weight = a[1];
    mlp.up_proj.weight = a[2];
    mlp.down_proj.weight = a[3];
    Tensor y = mlp.forward(a[0]);
    return std::vector<Tensor>{sum(y * cot), y};
  });
  ValueAndGrad r = f(args);
  EXPECT_TRUE(test::all_close(r.values[1], ref.get("swiglu.y"), 1e-12, 1e-12));
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(test::all_close(r.grads[i], ref.get(std::string("swiglu.grad.") + names[i]), 1e-11, 1e-12))
        << names[i];
}

}  // namespace
}  // namespace kiln
