// LoRA (kiln/nn/layers.h, kiln/models/lora.h): a Linear layer's adapter
// against naive f64 loops and its gradients against finite differences;
// adapters on a model start as the identity (the logits do not move), take
// the targets they are given and refuse what does not exist; merging the
// adapters into the weights gives the adapted model's logits.
#include "kiln/models/lora.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/kiln.h"
#include "kiln/nn/layers.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::all_close;
using test::error_of;
using test::random_tensor;

TEST(Lora, LinearAddsTheScaledLowRankProduct) {
  nn::Linear layer(5, 3, /*bias=*/true, DType::f64);
  layer.weight = random_tensor({3, 5}, DType::f64, 1);
  layer.bias = random_tensor({3}, DType::f64, 2);
  Generator g(3);
  layer.add_lora(2, 1.5, g);
  ASSERT_TRUE(layer.has_lora());
  layer.lora_B->weight = random_tensor({3, 2}, DType::f64, 4);
  const Tensor x = random_tensor({2, 4, 5}, DType::f64, 5);

  auto w = layer.weight.to_vector<double>(), b = layer.bias.to_vector<double>();
  auto a = layer.lora_A->weight.to_vector<double>(), bb = layer.lora_B->weight.to_vector<double>();
  auto xs = x.to_vector<double>();
  std::vector<double> want;
  for (int r = 0; r < 8; ++r)
    for (int o = 0; o < 3; ++o) {
      double y = b[o];
      for (int i = 0; i < 5; ++i) y += xs[r * 5 + i] * w[o * 5 + i];
      for (int k = 0; k < 2; ++k) {
        double ax = 0;
        for (int i = 0; i < 5; ++i) ax += a[k * 5 + i] * xs[r * 5 + i];
        y += 1.5 * bb[o * 2 + k] * ax;
      }
      want.push_back(y);
    }
  Tensor y = layer.forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 4, 3}));
  EXPECT_TRUE(all_close(y.to_vector<double>(), want, 1e-12, 1e-12));
}

TEST(Lora, AdapterStartsAsTheIdentityWithPeftsInitialisation) {
  nn::Linear layer(64, 8, false);
  Generator g(7);
  layer.add_lora(4, 2.0, g);
  EXPECT_TRUE(all_close(layer.lora_B->weight, zeros({8, 4}), 0, 0));
  // kaiming_uniform(a = sqrt(5)): uniform in +-1/sqrt(in).
  double lo = 1, hi = -1;
  for (float v : layer.lora_A->weight.to_vector<float>())
    lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
  EXPECT_GE(lo, -1.0 / 8);
  EXPECT_LE(hi, 1.0 / 8);
  EXPECT_LT(lo, -0.1);  // spread over the range, not near zero
  EXPECT_GT(hi, 0.1);
  auto names = layer.named_parameters();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[1].first, "lora_A.weight");
  EXPECT_EQ(names[2].first, "lora_B.weight");
  // init_parameters keeps lora_B zero.
  Generator g2(8);
  layer.init_parameters(g2, 0.5);
  EXPECT_TRUE(all_close(layer.lora_B->weight, zeros({8, 4}), 0, 0));
  EXPECT_NE(error_of([&] { layer.add_lora(4, 2.0, g); }).find("has an adapter already"),
            std::string::npos);
}

TEST(Lora, GradientsMatchFiniteDifferences) {
  nn::Linear layer(4, 3, true, DType::f64);
  Generator g(1);
  layer.add_lora(2, 0.75, g);
  auto fn = [&](const std::vector<Tensor>& a) {
    nn::ParameterScope scope(layer, {a[0], a[1], a[2], a[3]});
    return layer.forward(a[4]);
  };
  std::vector<Tensor> args = {
      random_tensor({3, 4}, DType::f64, 2), random_tensor({3}, DType::f64, 3),
      random_tensor({2, 4}, DType::f64, 4), random_tensor({3, 2}, DType::f64, 5),
      random_tensor({2, 3, 4}, DType::f64, 6)};
  EXPECT_TRUE(test::check_gradients(fn, args));
}

ModelConfig tiny(const std::string& name) {
  ModelConfig c = model_config(name);
  c.seq_len = 16;
  return c;
}

TEST(Lora, ModelAdaptersStartAsTheIdentityAndMergeToTheAdaptedModel) {
  for (const char* name : {"llama3_debug", "qwen3_debug"}) {
    SCOPED_TRACE(name);
    auto model = build_model(tiny(name), DType::f32, 3);
    const Tensor ids = from_vector<int32_t>({5, 17, 300, 2, 9, 1200, 77, 4}, {2, 4});
    const Tensor before = model->logits(ids);
    const nn::StateDict base = model->state_dict();
    LoraOptions o{4, 8, parse_lora_targets("q,k,v,o,gate,up,down")};
    Generator g(9);
    EXPECT_EQ(add_lora(*model, o, g), 7 * int64_t(model->model.layers.size()));
    EXPECT_TRUE(all_close(model->logits(ids), before, 0, 0));

    nn::StateDict adapters;
    Generator gb(10);
    for (auto& [n, p] : model->named_parameters()) {
      if (n.find(".lora_B.") != std::string::npos) *p = normal(p->shape(), 0, 0.05, gb);
      if (is_lora_parameter(n)) adapters[n] = *p;
    }
    EXPECT_EQ(adapters.size(), 14 * model->model.layers.size());
    EXPECT_TRUE(adapters.count("model.layers.0.self_attn.q_proj.lora_A.weight"));
    EXPECT_TRUE(adapters.count("model.layers.1.mlp.down_proj.lora_B.weight"));
    const Tensor adapted = model->logits(ids);
    EXPECT_FALSE(all_close(adapted, before, 1e-3, 1e-3)) << "the adapters should matter";

    auto merged = std::make_unique<CausalLM>(tiny(name));
    merged->load_state_dict(merge_lora(base, adapters, o.scale()));
    EXPECT_TRUE(all_close(merged->logits(ids), adapted, 1e-4, 1e-5));
  }
}

TEST(Lora, TargetsAreCheckedAndMoeExpertsAreNotLinearLayers) {
  EXPECT_EQ(parse_lora_targets("q,v"), (std::vector<std::string>{"q", "v"}));
  EXPECT_NE(error_of([] { parse_lora_targets("q,kv"); }).find("'kv' is not a layer LoRA can adapt"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_lora_targets("q,,v"); }).find("an empty name"), std::string::npos);
  EXPECT_NE(error_of([] { parse_lora_targets("q,q"); }).find("listed twice"), std::string::npos);

  auto moe = build_model(tiny("qwen3_moe_debug"), DType::f32, 3);
  Generator g(1);
  EXPECT_NE(error_of([&] { add_lora(*moe, {4, 8, {"q", "gate"}}, g); })
                .find("LoRA target 'gate': the model (qwen3_moe_debug) has no such layer"),
            std::string::npos);
}

TEST(Lora, MergeRefusesAdaptersThatDoNotFit) {
  nn::StateDict w = {{"m.weight", zeros({3, 4})}};
  EXPECT_NE(error_of([&] { merge_lora(w, {{"m.lora_A.weight", zeros({2, 4})}}, 1); })
                .find("has no 'm.lora_B.weight'"),
            std::string::npos);
  const nn::StateDict wide = {{"m.lora_A.weight", zeros({2, 5})},
                              {"m.lora_B.weight", zeros({3, 2})}};
  EXPECT_NE(error_of([&] { merge_lora(w, wide, 1); }).find("does not fit the weight"),
            std::string::npos);
  const nn::StateDict other = {{"x.lora_A.weight", zeros({2, 4})},
                               {"x.lora_B.weight", zeros({3, 2})}};
  EXPECT_NE(error_of([&] { merge_lora(w, other, 1); }).find("the model has no 'x.weight'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { merge_lora(w, {{"m.weight", zeros({3, 4})}}, 1); })
                .find("is not an adapter weight"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
