// The communication tensor parallelism puts into a training step
// (kiln/train/tensor_parallel.h), on 2 and 4 ranks with tp 2: per block,
// Megatron-LM's two region entries (attention's q/k/v and the MLP's
// gate/up share one each, so the backward sums each input's gradient over
// tp once) and two region exits (o_proj, down_proj). The losses themselves
// are checked against one process in tests/dist/data_parallel_test.cc.
#include <gtest/gtest.h>

#include <algorithm>

#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/models/transformer.h"
#include "kiln/ops/random.h"
#include "kiln/optim/adamw.h"
#include "kiln/train/parallelize.h"
#include "kiln/train/step.h"

namespace kiln::train {
namespace {

int64_t count(const ir::Graph& g, const std::string& op) {
  return std::count_if(g.nodes().begin(), g.nodes().end(),
                       [&](const ir::Node& n) { return n.op->name == op; });
}

TEST(TensorParallel, EachBlockEntersAndLeavesTwoRegions) {
  dist::MeshDegrees degrees;
  degrees.tensor_parallel_degree = 2;
  auto mesh = std::make_shared<dist::DeviceMesh>(dist::world(), degrees);
  dist::set_current_mesh(mesh);

  ModelConfig c = model_config("llama3_debug");
  auto model = build_model(c, DType::f32, 0);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& [name, p] : model->named_parameters())
    names.push_back(name), shapes.push_back(p->shape());
  std::vector<Tensor> masters = model->parameters();
  TensorParallelPlan plan(*mesh, c, names);
  plan.apply(*model);
  auto dist = std::make_shared<const ParamDistribution>(mesh, shapes, plan);

  optim::AdamW adamw({}, masters.size());
  StepOptions so;
  so.distribution = dist;
  TrainStep step(*model, {}, adamw, so);
  Generator gen(3);
  Tensor ids = (rand({2, 16}, gen) * double(c.vocab_size)).to(DType::i64);
  masters = dist->from_full(masters);
  ir::Graph g = step.graph(masters, adamw.init(masters), {{ids, ids, {}, {}}});

  const int64_t layers = c.n_layers;
  EXPECT_EQ(count(g, "enter_parallel_region"), 2 * layers);
  EXPECT_EQ(count(g, "leave_parallel_region"), 2 * layers);
}

}  // namespace
}  // namespace kiln::train
