// Component implementations registered from this file alone are selectable
// by the ordinary config path (recipe flags, --override) and are what the
// model calls; unknown names are errors listing the choices.
#include "kiln/nn/component_registry.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/models/transformer.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/loss.h"
#include "kiln/ops/elementwise.h"
#include "kiln/train/config.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::error_of;

int test_attention_calls = 0;

// The composite, counting its calls.
const nn::Registration<nn::AttentionFn> kCounting(
    nn::attention_impls(), "test_counting", "the composite, counting its calls (a test)",
    [](const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
       const Tensor& doc_ids) {
      ++test_attention_calls;
      return nn::attention_impls().get("composite")(q, k, v, options, doc_ids);
    });

// Twice the composite loss: a recognisable numeric effect.
const nn::Registration<nn::LossFn> kDoubled(
    nn::loss_impls(), "test_doubled", "twice the composite loss (a test)",
    [](const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index) {
      return nn::loss_impls().get("composite")(h, w, targets, ignore_index) * 2.0;
    });

#define EXPECT_CONTAINS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

train::TrainConfig load(std::vector<std::string> args) {
  args.insert(args.begin(), {"--config", "llama3_debug"});
  return train::load_train_config(train::parse_train_command_line(args));
}

TEST(ComponentRegistry, TestImplementationsAreSelectedByFlagsAndCalledByTheModel) {
  train::TrainConfig c = load({"--override", "attention=test_counting",
                               "--model.loss_impl=test_doubled", "--training.seq_len=8"});
  ModelConfig swapped = train::resolve_model_config(c);
  EXPECT_EQ(swapped.attention_impl, "test_counting");
  EXPECT_EQ(swapped.loss_impl, "test_doubled");
  ModelConfig plain = train::resolve_model_config(load({"--training.seq_len=8"}));

  Tensor ids = from_vector<int64_t>({1, 5, 9, 2, 7, 3, 8, 4}, {1, 8});
  Tensor targets = from_vector<int64_t>({5, 9, 2, 7, 3, 8, 4, 6}, {1, 8});
  auto a = build_model(plain, DType::f64, 3), b = build_model(swapped, DType::f64, 3);
  test_attention_calls = 0;
  double want = a->loss(ids, targets).item<double>();
  EXPECT_EQ(test_attention_calls, 0);
  double got = b->loss(ids, targets).item<double>();
  EXPECT_EQ(test_attention_calls, swapped.n_layers);  // once per block
  EXPECT_NEAR(got, 2 * want, 1e-12 * want);
}

TEST(ComponentRegistry, PrintConfigListsEveryImplementation) {
  std::string text = train::to_toml(load({}));
  EXPECT_CONTAINS(text, "attention_impl = \"composite\"\n");
  EXPECT_CONTAINS(text, "#   test_counting: the composite, counting its calls (a test)\n");
  EXPECT_CONTAINS(text, "#   test_doubled: twice the composite loss (a test)\n");
  for (const nn::ComponentRegistryBase* r :
       std::vector<const nn::ComponentRegistryBase*>{&nn::attention_impls(), &nn::loss_impls()})
    for (const std::string& impl : r->names())
      EXPECT_CONTAINS(text, "#   " + impl + ": " + r->description(impl) + "\n");
  EXPECT_CONTAINS(train::component_choices(), "attention=composite|flash|test_counting");
}

TEST(ComponentRegistry, UnknownNamesListTheChoices) {
  std::string e = error_of([] { nn::attention_impls().get("test_countin"); });
  EXPECT_CONTAINS(e, "'test_countin' is not a registered attention implementation");
  EXPECT_CONTAINS(e, "did you mean 'test_counting'");
  EXPECT_CONTAINS(e, "choices: composite, flash, test_counting");

  e = error_of([] { load({"--override", "loss=test_double"}); });
  EXPECT_CONTAINS(e, "model.loss_impl");
  EXPECT_CONTAINS(e, "did you mean 'test_doubled'");
  EXPECT_CONTAINS(e, "composite, fused_ce, test_doubled");

  e = error_of([] { load({"--model.norm_impl=fusd"}); });
  EXPECT_CONTAINS(e, "did you mean 'fused'");

  ModelConfig m = model_config("qwen3_debug");
  m.moe_impl = "groupd";
  e = error_of([&] { m.validate(); });
  EXPECT_CONTAINS(e, "moe_impl 'groupd' is not a registered moe implementation");
  EXPECT_CONTAINS(e, "did you mean 'grouped'");

  nn::AttentionConfig ac;
  ac.dim = 8, ac.n_heads = 2, ac.n_kv_heads = 2, ac.head_dim = 4, ac.impl = "splash";
  e = error_of([&] { nn::Attention attention(ac); });
  EXPECT_CONTAINS(e, "did you mean 'flash'");

  e = error_of([] { nn::attention_impls().add("flash", "again", nullptr); });
  EXPECT_CONTAINS(e, "attention implementation 'flash' is registered twice");
}

}  // namespace
}  // namespace kiln
