// `kiln train --dry-run [--world-size N] [--json]`: prints the plan of a run
// (kiln/train/dry_run.h) as a table, or as one JSON object for tools.
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "apps/kiln/commands.h"
#include "kiln/base/bytes.h"
#include "kiln/base/error.h"
#include "kiln/train/dry_run.h"

namespace kiln::cli {
namespace {

// Parameters with the layer index as "*", each (name, full, local) once with
// its count, in first-seen order: 291 tensors of llama3_8b in 11 lines.
struct ParamGroup {
  std::string name;
  Shape full, local;
  bool trained = true;
  int64_t count = 0;
};

std::vector<ParamGroup> group_layers(const std::vector<train::ParamPlan>& params) {
  static const std::regex layer(R"(\.layers\.[0-9]+\.)");
  std::vector<ParamGroup> groups;
  std::map<std::string, size_t> index;
  for (const train::ParamPlan& p : params) {
    std::string name = std::regex_replace(p.name, layer, ".layers.*.");
    std::string key = cat(name, p.full, p.local);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.push_back({name, p.full, p.local, p.trained, 0});
    ++groups[it->second].count;
  }
  return groups;
}

nlohmann::ordered_json to_json(const train::DryRun& d) {
  const train::MemoryEstimate& m = d.memory;
  nlohmann::ordered_json j;
  j["world_size"] = d.world_size;
  j["world_size_implied"] = d.world_size_implied;
  j["mesh"] = d.mesh;
  j["model"] = d.model.name;
  j["params"] = d.param_count;
  j["trained_params"] = d.trained_count;
  j["tensors"] = d.params.size();
  j["flops_per_token"] = d.flops_per_token;
  j["microbatches"] = d.microbatches;
  j["rung"] = d.rung;
  j["memory_per_rank"] = {{"params", m.params},       {"optimizer_state", m.optimizer_state},
                          {"batch", m.batch},         {"computed", m.computed},
                          {"gradients", m.gradients}, {"activations", nullptr},
                          {"recordings", m.recordings}, {"offloaded", m.offloaded},
                          {"checkpoint_copy", d.checkpoint_copy},
                          {"total", m.total()}};
  if (m.activations) j["memory_per_rank"]["activations"] = *m.activations;
  for (const train::ParamPlan& p : d.params)
    j["parameters"].push_back({{"name", p.name},
                               {"full", p.full.vec()},
                               {"local", p.local.vec()},
                               {"trained", p.trained}});
  return j;
}

}  // namespace

void print_dry_run(const train::TrainConfig& c, const train::DryRun& d, bool json,
                   std::ostream& out) {
  if (json) {
    out << to_json(d).dump(2) << "\n";
    return;
  }
  const ModelConfig& mc = d.model;
  out << "dry run: " << d.world_size << (d.world_size == 1 ? " rank" : " ranks")
      << (d.world_size_implied ? " (the parallelism degrees' product)" : " (--world-size)")
      << "; nothing allocated, nothing run\n"
      << "mesh: " << d.mesh << "\n"
      << "model: " << mc.name << " (" << mc.family << "), " << human_count(double(d.param_count))
      << " parameters (" << d.param_count << ") in " << d.params.size() << " tensors; "
      << human_count(d.flops_per_token) << " training FLOPs per token at seq_len "
      << c.training.seq_len
      << (d.trained_count < d.param_count ? " (4N + 6 x adapters + attention)" : " (6N + attention)")
      << "\n"
      << (d.trained_count < d.param_count
              ? cat("lora: ", d.trained_count, " trained parameters; the rest frozen (marked *)\n")
              : std::string())
      << "step: " << d.rung << "; " << c.training.local_batch_size << " x " << d.microbatches
      << " microbatches x " << c.training.seq_len << " tokens per rank; "
      << c.training.mixed_precision_param << " compute, f32 master weights\n\n";

  std::vector<ParamGroup> groups = group_layers(d.params);
  size_t width = 0;
  for (const ParamGroup& g : groups) width = std::max(width, g.name.size());
  out << "parameters: full shape -> rank 0's master shard\n";
  for (const ParamGroup& g : groups)
    out << (g.trained ? "  " : "* ") << std::left << std::setw(int(width)) << g.name << std::right
        << std::setw(5)
        << (g.count > 1 ? cat("x", g.count) : "") << "  " << std::left << std::setw(14)
        << to_string(g.full) << " -> " << to_string(g.local) << std::right << "\n";

  const train::MemoryEstimate& m = d.memory;
  auto row = [&](const std::string& what, const std::string& note,
                 std::optional<int64_t> bytes) {
    out << "  " << std::left << std::setw(24) << what << std::setw(52) << note << std::right
        << std::setw(11) << (bytes ? bytes_text(double(*bytes)) : "not known") << "\n";
  };
  out << "\nmemory per rank (rank 0; the estimate the trainer prints before its first step)\n";
  row("parameters", "f32 master weights, this rank's shards", m.params);
  row("optimizer state", "AdamW m and v, f32", m.optimizer_state);
  row("batch",
      cat(d.microbatches, " x [", c.training.local_batch_size, ", ", c.training.seq_len,
          "] ids and targets, step scalars"),
      m.batch);
  row("step", "peak of the step's memory plan", m.computed);
  row("  of which gradients", "f32, one per master, all live before clipping", m.gradients);
  row("  of which activations",
      m.activations
          ? cat("kept for the backward (", c.activation_checkpoint.mode, "), per microbatch")
          : "kept for the backward: inside compile.scan_layers' scan",
      m.activations);
  if (m.recordings > 0)
    row("recordings", "buffers the replayed programs keep (compile.replay)", m.recordings);
  row("expected peak",
      m.recordings > 0 ? "parameters + optimizer + batch + step + recordings"
                       : "parameters + optimizer state + batch + step",
      m.total());
  if (m.offloaded > 0)
    row("offloaded activations", "in host memory (the offload pool), not above", m.offloaded);
  if (d.checkpoint_copy > 0)
    row("checkpoint copy", "in host memory (async_mode = async), not above",
        d.checkpoint_copy);
}

}  // namespace kiln::cli
