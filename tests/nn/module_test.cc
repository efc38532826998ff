// Module: the named parameter tree, state_dict round trips and their errors,
// parameter replacement, init schemes, and the basic layers against naive
// loops.
#include "kiln/nn/module.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/kiln.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/mlp.h"
#include "tests/support/support.h"

namespace kiln::nn {
namespace {

using test::all_close;
using test::error_of;

// A two-level tree: "proj.weight", "proj.bias", "blocks.0.weight", ...
class Toy : public Module {
 public:
  Toy() : proj(3, 2, true) {
    register_parameter("scale", &scale, ones({2}), Init::ones);
    register_module("proj", &proj);
    for (int i = 0; i < 2; ++i) blocks.push_back(std::make_unique<RMSNorm>(2, 1e-6));
    register_module("blocks", &blocks);
  }
  Tensor scale;
  Linear proj;
  ModuleList<RMSNorm> blocks;
};

std::vector<std::string> names(Module& m) {
  std::vector<std::string> out;
  for (auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

TEST(Module, NamedParametersDepthFirstInRegistrationOrder) {
  Toy t;
  EXPECT_EQ(names(t), (std::vector<std::string>{"scale", "proj.weight", "proj.bias",
                                                "blocks.0.weight", "blocks.1.weight"}));
  EXPECT_EQ(t.num_parameters(), 2 + 6 + 2 + 2 + 2);
  EXPECT_EQ(t.named_parameters()[1].second, &t.proj.weight);
}

TEST(Module, StateDictRoundTrip) {
  Toy a, b;
  Generator g(1);
  a.init_parameters(g, 0.5);
  b.load_state_dict(a.state_dict());
  for (auto& [name, value] : a.state_dict())
    EXPECT_TRUE(all_close(b.state_dict().at(name), value, 0, 0)) << name;
  // Loading copies: changing the source afterwards leaves b alone.
  Tensor before = b.proj.weight.contiguous();
  std::vector<double> copy = before.to_vector<double>();
  a.proj.weight.fill_(7);
  EXPECT_EQ(b.proj.weight.to_vector<double>(), copy);
}

TEST(Module, LoadStateDictConvertsDtype) {
  Toy a;
  StateDict d = a.state_dict();
  d["proj.weight"] = full({2, 3}, 0.25, DType::f64);
  a.load_state_dict(d);
  EXPECT_EQ(a.proj.weight.dtype(), DType::f32);
  EXPECT_EQ(a.proj.weight.to_vector<double>(), std::vector<double>(6, 0.25));
}

TEST(Module, LoadStateDictReportsEveryProblem) {
  Toy a;
  StateDict d = a.state_dict();
  d.erase("blocks.1.weight");
  d["proj.weigth"] = zeros({2, 3});
  d["proj.bias"] = zeros({3});
  Tensor kept = a.scale;
  d["scale"] = full({2}, 5.0);
  std::string m = error_of([&] { a.load_state_dict(d); });
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  EXPECT_NE(m.find("blocks.1.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("unexpected"), std::string::npos) << m;
  EXPECT_NE(m.find("proj.weigth"), std::string::npos) << m;
  EXPECT_NE(m.find("proj.bias: expected [2], got [3]"), std::string::npos) << m;
  // Nothing was written.
  EXPECT_EQ(a.scale.to_vector<double>(), (std::vector<double>{1, 1}));

  // Non-strict ignores missing and unexpected entries but never shapes.
  d["proj.bias"] = zeros({2});
  a.load_state_dict(d, false);
  EXPECT_EQ(a.scale.to_vector<double>(), (std::vector<double>{5, 5}));
  d["proj.bias"] = zeros({3});
  EXPECT_NE(error_of([&] { a.load_state_dict(d, false); }).find("wrong shape"), std::string::npos);
}

TEST(Module, SetParametersChecksAndScopeRestores) {
  Toy t;
  std::vector<Tensor> p = t.parameters();
  EXPECT_NE(error_of([&] { t.set_parameters({p[0]}); }).find("has 5 parameters"),
            std::string::npos);
  std::vector<Tensor> bad = p;
  bad[1] = zeros({3, 2});
  EXPECT_NE(error_of([&] { t.set_parameters(bad); }).find("proj.weight"), std::string::npos);
  std::vector<Tensor> other = p;
  other[0] = full({2}, 3.0);
  {
    ParameterScope scope(t, other);
    EXPECT_EQ(t.scale.to_vector<double>(), (std::vector<double>{3, 3}));
  }
  EXPECT_EQ(t.scale.to_vector<double>(), (std::vector<double>{1, 1}));
}

TEST(Module, InitSchemes) {
  Linear big(200, 100, true);
  RMSNorm norm(7, 1e-6);
  Generator g(3);
  big.init_parameters(g, 0.02);
  norm.init_parameters(g, 0.02);
  std::vector<double> w = big.weight.to_vector<double>();
  double s = 0, ss = 0;
  for (double v : w) s += v, ss += v * v;
  double n = double(w.size()), m = s / n, sd = std::sqrt(ss / n - m * m);
  EXPECT_NEAR(m, 0, 0.001);
  EXPECT_NEAR(sd, 0.02, 0.001);
  EXPECT_EQ(big.bias.to_vector<double>(), std::vector<double>(100, 0));
  EXPECT_EQ(norm.weight.to_vector<double>(), std::vector<double>(7, 1));
  // Same seed, same draws.
  Linear again(200, 100, true);
  Generator g2(3);
  again.init_parameters(g2, 0.02);
  EXPECT_EQ(again.weight.to_vector<double>(), w);
}

TEST(Layers, LinearMatchesLoop) {
  Linear l(3, 2, true, DType::f64);
  l.weight = from_vector<double>({1, 2, 3, -1, 0, 4}, {2, 3}, kCPU);
  l.bias = from_vector<double>({0.5, -0.5}, {2}, kCPU);
  Tensor x = from_vector<double>({1, 1, 1, 2, 0, -1}, {1, 2, 3}, kCPU);
  Tensor y = l.forward(x);
  EXPECT_EQ(y.shape(), Shape({1, 2, 2}));
  // Rows: [1+2+3+.5, -1+0+4-.5], [2-3+.5, -2-4-.5].
  EXPECT_TRUE(all_close(y.to_vector<double>(), {6.5, 2.5, -0.5, -6.5}, 0, 1e-12));
  EXPECT_NE(error_of([&] { l.forward(zeros({2, 4}, DType::f64)); }).find("3 input features"),
            std::string::npos);
}

TEST(Layers, EmbeddingAndRMSNorm) {
  Embedding e(4, 2);
  e.weight = from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}, kCPU);
  Tensor ids = from_vector<int64_t>({3, 0, 3}, {1, 3}, kCPU);
  EXPECT_EQ(e.forward(ids).to_vector<double>(), (std::vector<double>{6, 7, 0, 1, 6, 7}));

  RMSNorm n(2, 0.0, DType::f64);
  n.weight = from_vector<double>({1, 2}, {2}, kCPU);
  Tensor x = from_vector<double>({3, 4}, {1, 2}, kCPU);
  double r = std::sqrt((9 + 16) / 2.0);
  EXPECT_TRUE(all_close(n.forward(x).to_vector<double>(), {3 / r, 8 / r}, 1e-12, 0));
}

TEST(Layers, SwiGLUNamesAndValues) {
  SwiGLU mlp(3, 5, DType::f64);
  std::vector<std::string> expected = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
  EXPECT_EQ(names(mlp), expected);
  Generator g(5);
  mlp.init_parameters(g, 0.5);
  Tensor x = randn({2, 3}, g, DType::f64);
  // From the basic ops; the module runs the fused silu_mul.
  Tensor gate = matmul(x, mlp.gate_proj.weight, false, true);
  Tensor up = matmul(x, mlp.up_proj.weight, false, true);
  Tensor ref = matmul(silu(gate) * up, mlp.down_proj.weight, false, true);
  EXPECT_TRUE(all_close(mlp.forward(x), ref, 1e-12, 1e-14));
}

TEST(Module, ValueAndGradOverModule) {
  Linear l(2, 1, true, DType::f64);
  l.weight = from_vector<double>({1, 2}, {1, 2}, kCPU);
  l.bias = from_vector<double>({0}, {1}, kCPU);
  Tensor x = from_vector<double>({3, 4}, {1, 2}, kCPU);
  // loss = (w . x + b)^2 = 121; d/dw = 2 * 11 * x, d/db = 22.
  ValueAndGrad r = value_and_grad(l, [&] { return std::vector<Tensor>{sum(square(l.forward(x)))}; });
  EXPECT_DOUBLE_EQ(r.values[0].item<double>(), 121);
  EXPECT_EQ(r.grads[0].to_vector<double>(), (std::vector<double>{66, 88}));
  EXPECT_EQ(r.grads[1].to_vector<double>(), (std::vector<double>{22}));
  EXPECT_TRUE(l.weight.impl().materialized());  // the module's own parameters are back
}

}  // namespace
}  // namespace kiln::nn
