// The stacked layout of the layers' parameters (layer_stacking.h): which
// layouts it takes, stack/unstack round trips without copying, the groups,
// the gradient norm equal to optim::global_norm's bit for bit, and the
// graph trainer's whole step no larger at 32 layers than at 2.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/models/transformer.h"
#include "kiln/ops/random.h"
#include "kiln/optim/clip.h"
#include "kiln/runtime/backend.h"
#include "kiln/train/layer_stacking.h"
#include "kiln/train/step.h"

namespace kiln::train {
namespace {

struct Params {
  std::vector<std::string> names;
  std::vector<Tensor> values;
  std::vector<ir::TypeInfo> types() const { return types_of(values); }
};

// emb, layers.{0,1,2}.{a [3, 4], b [4]}, head: random values.
Params three_layers() {
  Generator g(7);
  Params p;
  auto add = [&](const std::string& name, Shape shape) {
    p.names.push_back(name);
    p.values.push_back(randn(shape, g));
  };
  add("model.emb", {5, 4});
  for (int l = 0; l < 3; ++l) {
    add("model.layers." + std::to_string(l) + ".a", {3, 4});
    add("model.layers." + std::to_string(l) + ".b", {4});
  }
  add("head", {4, 5});
  return p;
}

optim::ParamGroups groups_of(const Params& p) {
  return optim::default_param_groups(p.names, p.values, 0.1);
}

// Which buffer, and where in it, a materialized tensor starts.
std::pair<const Storage*, int64_t> where(const Tensor& t) {
  return {t.impl().storage.get(), t.impl().offset};
}

TEST(LayerStacking, StacksLayerMajorRunsAndUnstacksIntoViews) {
  Params p = three_layers();
  auto s = LayerStacking::plan(p.names, p.types(), groups_of(p));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size(), 4u);  // emb, stack a, stack b, head
  std::vector<Tensor> stacked = s->stack(p.values);
  ASSERT_EQ(stacked.size(), 4u);
  EXPECT_EQ(stacked[1].shape(), Shape({3, 3, 4}));
  EXPECT_EQ(stacked[2].shape(), Shape({3, 4}));
  // Layer 1's b is row 1 of stack b.
  EXPECT_EQ(stacked[2].select(0, 1).to_vector<float>(), p.values[4].to_vector<float>());

  std::vector<Tensor> views = s->unstack(stacked);
  ASSERT_EQ(views.size(), p.values.size());
  for (size_t i = 0; i < views.size(); ++i) EXPECT_EQ(views[i].shape(), p.values[i].shape());
  // Layer 1's a: a view into stack a, 12 elements in.
  EXPECT_EQ(where(views[3]), std::make_pair(where(stacked[1]).first, where(stacked[1]).second + 12));
  // The views stack back into the same buffers.
  std::vector<Tensor> again = s->stack(views);
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(where(again[i]), where(stacked[i]));
}

TEST(LayerStacking, RefusesLayersThatDiffer) {
  Params p = three_layers();
  auto types = p.types();
  EXPECT_FALSE(LayerStacking::plan({"a", "b"}, {types[0], types[1]}, {{{}}, {0, 0}}));
  // Layer 2's a of another shape.
  auto shapes = types;
  shapes[5].shape = Shape{2, 4};
  EXPECT_FALSE(LayerStacking::plan(p.names, shapes, groups_of(p)));
  // Layer 1's a in another optimizer group.
  optim::ParamGroups g = groups_of(p);
  g.groups.push_back({0.0, 1.0});
  g.group[3] = int(g.groups.size()) - 1;
  EXPECT_FALSE(LayerStacking::plan(p.names, types, g));
  // The layers not one run.
  auto names = p.names;
  std::swap(names[3], names[7]);
  EXPECT_FALSE(LayerStacking::plan(names, types, groups_of(p)));
}

TEST(LayerStacking, GroupsFollowTheLayers) {
  Params p = three_layers();
  optim::ParamGroups per_param = groups_of(p);
  auto s = LayerStacking::plan(p.names, p.types(), per_param);
  optim::ParamGroups g = s->groups(per_param);
  ASSERT_EQ(g.group.size(), 4u);
  EXPECT_EQ(g.group[1], per_param.group[1]);  // a: decayed (2-D)
  EXPECT_EQ(g.group[2], per_param.group[2]);  // b: not decayed (1-D)
  EXPECT_NE(g.group[1], g.group[2]);
}

TEST(LayerStacking, NormEqualsThePerParameterNormBitForBit) {
  Params p = three_layers();
  auto s = LayerStacking::plan(p.names, p.types(), groups_of(p));
  float expected = optim::global_norm(p.values).item<float>();
  EXPECT_EQ(s->global_norm(s->stack(p.values)).item<float>(), expected);
}

// The graph trainer with scan_layers on a llama3_debug model of `layers`.
struct ScanStep {
  std::unique_ptr<CausalLM> model;
  std::vector<Tensor> masters;
  std::optional<optim::AdamW> adamw;
  std::optional<TrainStep> step;
  std::vector<data::Batch> batches;

  explicit ScanStep(int64_t layers) {
    ModelConfig c = model_config("llama3_debug");
    c.n_layers = layers;
    model = build_model(c, DType::f32, 0);
    masters = model->parameters();
    std::vector<std::string> names;
    for (const auto& [name, t] : model->named_parameters()) names.push_back(name);
    adamw.emplace(optim::AdamWOptions{}, optim::default_param_groups(names, masters, 0.1));
    StepOptions so;
    so.rung = Rung::graph_trainer;
    so.scan_layers = true;
    step.emplace(*model, optim::MixedPrecisionPolicy{}, *adamw, so);
    Generator gen(1);
    Tensor ids = (rand({2, 16}, gen) * double(c.vocab_size)).to(DType::i64);
    batches = {{ids, ids, {}, {}}};
  }
  int64_t nodes() const {
    return int64_t(step->graph(masters, adamw->init(masters), batches).nodes().size());
  }
};

TEST(LayerStacking, WholeStepDoesNotGrowWithDepth) {
  int64_t two = ScanStep(2).nodes(), thirty_two = ScanStep(32).nodes();
  std::cout << "graph trainer step with scan_layers: " << two << " nodes at 2 layers, "
            << thirty_two << " at 32\n";
  EXPECT_EQ(thirty_two, two);
}

TEST(LayerStacking, StepsUpdateTheStacksInPlace) {
  ScanStep s(3);
  optim::AdamWState state = s.adamw->init(s.masters);
  s.step->run(s.masters, state, s.batches, 1e-3);  // the first step stacks (copies)
  auto places = [&] {
    std::vector<std::pair<const Storage*, int64_t>> p;
    for (const auto* list : {&s.masters, &state.m, &state.v})
      for (const Tensor& t : *list) p.push_back(where(t));
    return p;
  };
  auto before = places();
  s.step->run(s.masters, state, s.batches, 1e-3);
  // Every master and moment (the layers' views into the stacks) is where it
  // was: the program updated the donated buffers in place.
  EXPECT_EQ(places(), before);
  EXPECT_EQ(state.step, 2);
}

}  // namespace
}  // namespace kiln::train
