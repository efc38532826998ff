// SimpleFSDP, DDP and HSDP in the training step (kiln/train/parallelize.h),
// on 2 and 4 ranks: the shard layout, and two steps of the llama3 debug
// model on every mesh the world allows against the same steps computed by
// one process on the global batch (each rank computes that reference
// itself), eagerly and in the graph trainer, whose program must hold the
// collectives when SPMD-safe (and gives the same bits when they are skinny).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/models/transformer.h"
#include "kiln/optim/adamw.h"
#include "kiln/runtime/executable.h"
#include "kiln/train/parallelize.h"
#include "kiln/train/step.h"

namespace kiln::train {
namespace {

using namespace std::chrono_literals;

int ranks() { return dist::world()->size(); }

std::shared_ptr<dist::DeviceMesh> use_mesh(int64_t replicate) {
  dist::world()->set_timeout(60s);  // a failed assertion on one rank must not hang the others
  dist::MeshDegrees d;
  d.data_parallel_replicate_degree = replicate;
  auto mesh = std::make_shared<dist::DeviceMesh>(dist::world(), d);
  dist::set_current_mesh(mesh);
  return mesh;
}

TEST(SimpleFsdp, ShardsAreRowsOfTheZeroPaddedTensor) {
  auto mesh = use_mesh(1);
  const int64_t n = ranks(), r = mesh->coordinate("dp_shard");
  // 5 rows do not divide over 2 or 4 ranks; 8 do.
  std::vector<Shape> shapes = {{5, 3}, {8}};
  std::vector<Tensor> full;
  for (const Shape& s : shapes) {
    std::vector<float> v(size_t(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i + 1);
    full.push_back(from_vector<float>(v, s));
  }
  ParamDistribution d(mesh, shapes);
  std::vector<Tensor> shards = d.from_full(full);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int64_t rows = shapes[i][0], k = (rows + n - 1) / n, inner = shapes[i].numel() / rows;
    Shape want = shapes[i];
    want[0] = k;
    EXPECT_EQ(shards[i].shape(), want);
    std::vector<float> got = shards[i].to_vector<float>();
    for (int64_t row = 0; row < k; ++row)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t global = r * k + row;
        float expect = global < rows ? float(global * inner + j + 1) : 0.0f;  // padding: zeros
        EXPECT_EQ(got[size_t(row * inner + j)], expect) << "tensor " << i << " row " << global;
      }
  }
  std::vector<Tensor> back = d.to_full(shards);
  for (size_t i = 0; i < full.size(); ++i)
    EXPECT_EQ(back[i].to_vector<float>(), full[i].to_vector<float>()) << "tensor " << i;
}

struct Outcome {
  std::vector<double> loss, grad_norm;
  std::vector<Tensor> initial, masters;  // full, before and after the steps
};

constexpr int64_t kSteps = 2, kSeq = 16, kGlobalBatch = 4;

// kSteps steps of the debug model from its seed-0 initialisation on a fixed
// global batch of kGlobalBatch rows, this rank taking its dp share of it.
Outcome train(const std::shared_ptr<const ParamDistribution>& d, int64_t dp_rank, int64_t dp,
              Rung rung, const Executable** program = nullptr) {
  ModelConfig mc = model_config("llama3_debug");
  mc.seq_len = kSeq;
  std::unique_ptr<CausalLM> model = build_model(mc, DType::f32, 0);
  std::vector<std::string> names;
  std::vector<Tensor> masters;
  for (auto& [name, p] : model->named_parameters()) names.push_back(name), masters.push_back(*p);
  optim::AdamW adamw({}, optim::default_param_groups(names, masters, 0.1));
  Outcome out;
  out.initial = masters;
  if (d) masters = d->from_full(masters);
  optim::AdamWState state = adamw.init(masters);

  Generator g(7);
  Tensor ids = (rand({kGlobalBatch, kSeq + 1}, g) * double(mc.vocab_size)).to(DType::i64);
  const int64_t local = kGlobalBatch / dp;
  Tensor mine = ids.slice(0, dp_rank * local, (dp_rank + 1) * local);
  data::Batch b{mine.slice(1, 0, kSeq).contiguous(), mine.slice(1, 1, kSeq + 1).contiguous(), {},
                {}};

  StepOptions o;
  o.rung = rung;
  o.distribution = d;
  TrainStep step(*model, {}, adamw, o);
  for (int64_t s = 0; s < kSteps; ++s) {
    StepResult r = step.run(masters, state, {b}, 1e-2);
    out.loss.push_back(r.loss);
    out.grad_norm.push_back(r.grad_norm);
  }
  out.masters = d ? d->to_full(masters) : masters;
  if (program) *program = step.program();
  return out;
}

// Collective `op`'s nodes, blocking or started (scheduled for overlap).
int64_t count(const ir::Graph& g, const std::string& op) {
  return std::count_if(g.nodes().begin(), g.nodes().end(), [&](const ir::Node& n) {
    return n.op->name == op || n.op->name == op + "_start";
  });
}

// Relative closeness: the dp ranks sum their parts of each reduction (the
// loss mean, the weight gradients' contraction over the batch) separately
// and then in rank order, which rounds differently from one process's
// single pass: f32 rounding, ~1e-7 relative per reduction. 1e-5 leaves a
// wide margin over 2 steps while a wrong scale (e.g. a missing 1/dp: a
// gradient norm 2x) is far outside it.
void expect_close(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-5 * std::abs(want)) << what;
}

void expect_same_training(const std::vector<int64_t>& replicate_degrees) {
  Outcome reference = train(nullptr, 0, 1, Rung::eager);
  for (int64_t rep : replicate_degrees) {
    auto mesh = use_mesh(rep);
    std::vector<Shape> shapes;
    for (const Tensor& m : reference.masters) shapes.push_back(m.shape());
    auto d = std::make_shared<const ParamDistribution>(mesh, shapes);
    const std::string mesh_name = mesh->layout().describe();
    const Executable* program = nullptr;
    Outcome eager = train(d, mesh->coordinate("dp"), mesh->size("dp"), Rung::eager);
    Outcome skinny = train(d, mesh->coordinate("dp"), mesh->size("dp"), Rung::graph_trainer);
    Outcome graph;
    {
      SpmdSafeGuard safe;  // the collectives inside the one program
      graph = train(d, mesh->coordinate("dp"), mesh->size("dp"), Rung::graph_trainer, &program);
    }
    for (int64_t s = 0; s < kSteps; ++s) {
      std::string at = mesh_name + ", step " + std::to_string(s + 1);
      expect_close(eager.loss[size_t(s)], reference.loss[size_t(s)], "loss, " + at);
      expect_close(eager.grad_norm[size_t(s)], reference.grad_norm[size_t(s)], "norm, " + at);
    }
    // The graph trainer runs the same function, collectives included: the
    // same bits, with collectives as programs of their own (skinny) or not.
    EXPECT_EQ(graph.loss, eager.loss) << mesh_name;
    EXPECT_EQ(graph.grad_norm, eager.grad_norm) << mesh_name;
    EXPECT_EQ(skinny.loss, eager.loss) << mesh_name;
    EXPECT_EQ(skinny.grad_norm, eager.grad_norm) << mesh_name;
    // The parameters moved as one process moved them. Not elementwise: AdamW
    // divides by sqrt(v), so a gradient element that nearly cancels (its
    // rounding error comparable to itself) can move by a good part of lr
    // either way. Over all parameters the difference stays a tiny fraction
    // of the update (observed ~2.5e-6 in L2).
    double diff2 = 0, update2 = 0;
    for (size_t i = 0; i < reference.masters.size(); ++i) {
      std::vector<float> want = reference.masters[i].to_vector<float>(),
                         got = eager.masters[i].to_vector<float>(),
                         before = reference.initial[i].to_vector<float>();
      for (size_t j = 0; j < want.size(); ++j) {
        diff2 += std::pow(double(got[j]) - want[j], 2);
        update2 += std::pow(double(want[j]) - before[j], 2);
      }
      EXPECT_EQ(graph.masters[i].to_vector<float>(), got) << mesh_name << ", parameter " << i;
      EXPECT_EQ(skinny.masters[i].to_vector<float>(), got) << mesh_name << ", parameter " << i;
    }
    EXPECT_LT(std::sqrt(diff2 / update2), 1e-4) << mesh_name;
    ASSERT_NE(program, nullptr);
    const ir::Graph& g = program->graph();
    const int64_t np = int64_t(reference.masters.size());
    if (d->sharded()) {
      // One all_gather per parameter in the forward, its reduce_scatter in the backward.
      EXPECT_EQ(count(g, "all_gather"), np) << mesh_name;
      EXPECT_EQ(count(g, "reduce_scatter"), np) << mesh_name;
    }
    // The loss's mean over dp, the replicas' gradient sums, the norm's squares over shards.
    EXPECT_EQ(count(g, "all_reduce"),
              1 + (mesh->size("dp_replicate") > 1 ? np : 0) + (d->sharded() ? 1 : 0))
        << mesh_name;
  }
}

TEST(SimpleFsdp, EveryMeshTrainsAsOneProcessOnTheGlobalBatch) {
  // FSDP over all ranks, DDP over all ranks, and on 4 ranks HSDP 2 x 2.
  std::vector<int64_t> replicate = {1, ranks()};
  if (ranks() == 4) replicate.push_back(2);
  expect_same_training(replicate);
}

}  // namespace
}  // namespace kiln::train
