#include "kiln/autograd/grad.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/rules.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::check_gradients;
using test::random_tensor;

// A test-only a + b whose vjp rule records which inputs' gradients it was
// asked for, one entry per call.
std::vector<std::vector<bool>> g_wanted;
const ir::OpDef& kRecordingAdd = ops::declare({
    .name = "test_recording_add",
    .num_inputs = 2,
    .infer = ops::same_as_first,
    .vjp = [](VjpCall& c) {
      g_wanted.push_back({c.wants(0), c.wants(1)});
      c.grads = {c.cot(0), c.cot(0)};
    },
    .composite = [](CompositeCall& c) { c.outputs = {c.inputs[0] + c.inputs[1]}; },
});

TEST(ValueAndGrad, ScalarChainMatchesCalculus) {
  // f(x, y) = x*y + exp(x): df/dx = y + exp(x), df/dy = x.
  auto f = value_and_grad([](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{a[0] * a[1] + exp(a[0])};
  });
  ValueAndGrad r = f({scalar(0.5, DType::f64), scalar(3.0, DType::f64)});
  EXPECT_DOUBLE_EQ(r.values[0].item<double>(), 1.5 + std::exp(0.5));
  EXPECT_DOUBLE_EQ(r.grads[0].item<double>(), 3.0 + std::exp(0.5));
  EXPECT_DOUBLE_EQ(r.grads[1].item<double>(), 0.5);
}

TEST(ValueAndGrad, ReusedValuesAccumulateGradients) {
  auto f = [](const std::vector<Tensor>& a) { return a[0] * a[0] * a[0] + a[0]; };
  EXPECT_TRUE(check_gradients(f, {random_tensor({5}, DType::f64, 1)}));
}

TEST(ValueAndGrad, ThroughViewsAndBroadcasting) {
  auto f = [](const std::vector<Tensor>& a) {
    Tensor t = a[0].t().slice(0, 1, 4, 2);  // [2, 3] strided view of [3, 4]
    return t * a[1] + a[1].unsqueeze(0).expand({4, 3}).slice(0, 0, 2);
  };
  EXPECT_TRUE(check_gradients(f, {random_tensor({3, 4}, DType::f64, 2), random_tensor({3}, DType::f64, 3)}));
}

TEST(ValueAndGrad, AuxiliaryOutputsPassThrough) {
  auto f = value_and_grad([](const std::vector<Tensor>& a) {
    Tensor y = square(a[0]);
    return std::vector<Tensor>{sum(y), y};
  });
  ValueAndGrad r = f({from_vector<double>({1, 2, 3}, {3})});
  EXPECT_EQ(r.values[1].to_vector<double>(), (std::vector<double>{1, 4, 9}));
  EXPECT_EQ(r.grads[0].to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

TEST(ValueAndGrad, IntegerArgumentsGetNoGradient) {
  auto f = value_and_grad([](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(a[0] * a[1].to(DType::f32))};
  });
  ValueAndGrad r = f({ones({2}), from_vector<int64_t>({3, 4}, {2})});
  EXPECT_FALSE(r.grads[1].defined());
  EXPECT_EQ(r.grads[0].to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(ValueAndGrad, UnusedArgumentsGetZeroGradient) {
  auto f = value_and_grad([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0])}; });
  ValueAndGrad r = f({ones({2}), ones({3})});
  EXPECT_EQ(r.grads[1].to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

TEST(ValueAndGrad, CapturedTensorsAreConstants) {
  Tensor w = from_vector<double>({2, 3}, {2});
  auto f = value_and_grad([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0] * w)}; });
  EXPECT_EQ(f({ones({2}, DType::f64)}).grads[0].to_vector<double>(), (std::vector<double>{2, 3}));
}

// Only values that depend on the differentiated arguments get gradients:
// a rule hears which of its inputs' gradients are wanted, and a node that
// reads constants alone is not differentiated.
TEST(ValueAndGrad, RulesAreAskedOnlyForTheGradientsThatReachTheArguments) {
  Tensor c = from_vector<double>({2, 3}, {2});
  auto f = value_and_grad([&](const std::vector<Tensor>& a) {
    Tensor constant = apply1(kRecordingAdd, {c, c});
    return std::vector<Tensor>{sum(apply1(kRecordingAdd, {a[0], c}) * constant)};
  });
  g_wanted.clear();
  EXPECT_EQ(f({ones({2}, DType::f64)}).grads[0].to_vector<double>(), (std::vector<double>{4, 6}));
  EXPECT_EQ(g_wanted, (std::vector<std::vector<bool>>{{true, false}}));
}

// The gradient of a constant that a rule computes beside a wanted one (a
// frozen weight's, beside its input's) is neither returned nor run.
TEST(ValueAndGrad, GradientsOfConstantsAreDropped) {
  Tensor w = random_tensor({4, 3}, DType::f32, 1), x = random_tensor({2, 4}, DType::f32, 2);
  auto loss = [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(matmul(a[0], w))}; };
  auto rec = test::trace_loss_and_grads(loss, {x});
  int matmuls = 0;
  for (const ir::Node& n : rec->graph.nodes()) matmuls += n.op->name == "matmul";
  EXPECT_EQ(matmuls, 2) << "the forward and x's gradient, not w's:\n" << ir::to_text(rec->graph);
}

TEST(ValueAndGrad, NestedGradientsGiveSecondDerivatives) {
  // d/dx (d/dx x^3) = 6x.
  auto inner = value_and_grad([](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(a[0] * a[0] * a[0])};
  });
  auto outer = value_and_grad([&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(inner(a).grads[0])};
  });
  EXPECT_EQ(outer({from_vector<double>({1, 2}, {2})}).grads[0].to_vector<double>(),
            (std::vector<double>{6, 12}));
}

TEST(ValueAndGrad, LossMustBeAFloatingScalar) {
  auto f = value_and_grad([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 2.0}; });
  try {
    f({ones({3})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("floating scalar"), std::string::npos) << e.what();
  }
}

TEST(ValueAndGrad, ReadingValuesInsideTheTraceIsAnError) {
  auto f = value_and_grad([](const std::vector<Tensor>& a) {
    if (sum(a[0]).item<float>() > 0) return std::vector<Tensor>{sum(a[0])};
    return std::vector<Tensor>{sum(-a[0])};
  });
  try {
    f({ones({3})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inside a traced function"), std::string::npos) << e.what();
  }
}

TEST(ValueAndGrad, BackwardIsMoreIr) {
  auto rec = Recording::create();
  Tensor x = rec->tensor(rec->capture(ones({3})), kCPU);
  {
    ContextGuard trace(std::make_shared<TraceContext>(rec));
    Tensor loss = sum(exp(x));
    size_t forward_nodes = rec->graph.nodes().size();
    std::vector<Tensor> g = append_backward(*rec, loss, {x});
    EXPECT_GT(rec->graph.nodes().size(), forward_nodes);
    rec->graph.set_outputs({rec->value_of(g[0])});
  }
  ir::verify(rec->graph);
  std::string text = ir::to_text(rec->graph);
  EXPECT_NE(text.find("= exp("), std::string::npos) << text;
  EXPECT_NE(text.find("= mul("), std::string::npos) << text;  // cotangent * exp(x)
}

}  // namespace
}  // namespace kiln
