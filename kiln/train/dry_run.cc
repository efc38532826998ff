#include "kiln/train/dry_run.h"

#include "kiln/base/error.h"
#include "kiln/data/loader.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/recording.h"
#include "kiln/train/run_setup.h"
#include "kiln/train/trainer.h"

namespace kiln::train {
namespace {

// Tensors made while it lives are pending values of a recording that never
// runs: shapes and dtypes without memory.
class PlaceholderScope {
 public:
  PlaceholderScope() : guard_(std::make_shared<TraceContext>(Recording::create())) {}

 private:
  ContextGuard guard_;
};

// What the loader hands the step, as placeholders (DataLoader::fill's types).
std::vector<data::Batch> placeholder_batches(const TrainConfig& c, int64_t microbatches) {
  const Shape shape{c.training.local_batch_size, c.training.seq_len};
  std::vector<data::Batch> out(static_cast<size_t>(microbatches));
  for (data::Batch& b : out) {
    b.ids = zeros(shape, DType::i64);
    b.targets = zeros(shape, DType::i64);
    if (c.data.document_mask)
      b.doc_ids = zeros(shape, DType::i64), b.positions = zeros(shape, DType::i64);
  }
  return out;
}

}  // namespace

int implied_world_size(const TrainConfig& c) {
  const ParallelismSection& p = c.parallelism;
  // An unset dp_shard degree takes at least the expert degree's ranks.
  const int64_t shard = p.data_parallel_shard_degree == -1 ? p.expert_parallel_degree
                                                           : p.data_parallel_shard_degree;
  return int(p.data_parallel_replicate_degree * shard * p.tensor_parallel_degree);
}

DryRun dry_run(const TrainConfig& c, int world_size) {
  check_supported(c);
  DryRun out;
  out.world_size_implied = world_size == 0;
  out.world_size = world_size == 0 ? implied_world_size(c) : world_size;
  auto mesh = std::make_shared<dist::DeviceMesh>(mesh_degrees(c), out.world_size, 0);
  // Placeholders have no memory, so the plan is the same on every device.
  RunSetup s(c, mesh, kCPU);
  PlaceholderScope placeholders;
  s.build(/*load_initial_weights=*/false);

  out.mesh = s.dist->describe();
  out.model = s.mc;
  const size_t n = s.frozen ? s.frozen->frozen.size() : s.names.size();
  for (size_t i = 0, t = 0, f = 0; i < n; ++i) {
    if (s.frozen && s.frozen->frozen[i]) {
      out.params.push_back({s.frozen->names[f], s.frozen->shapes[f], s.frozen->shards[f].shape(),
                            false});
      ++f;
    } else {
      out.params.push_back({s.names[t], s.shapes[t], s.masters[t].shape(), true});
      out.trained_count += s.shapes[t].numel();
      ++t;
    }
    out.param_count += out.params.back().full.numel();
  }
  out.flops_per_token = s.flops_per_token();
  out.microbatches = s.accum;
  out.rung = c.compile.graph_trainer ? "graph trainer"
             : c.compile.enable      ? "per-block compile"
                                     : "eager";
  out.memory = s.expected_memory(placeholder_batches(c, s.accum));
  if (saves_in_background(c)) out.checkpoint_copy = s.checkpoint_shard_bytes();
  return out;
}

}  // namespace kiln::train
