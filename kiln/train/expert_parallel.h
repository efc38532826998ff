// The plan for a mixture-of-experts model's MoE layers on a device mesh:
//   experts   each MoE layer's experts (mlp.experts.gate_up_proj and
//             down_proj, [E, ...]) split along dim 0 over the mesh's "ep"
//             axis: rank j holds experts [j E/ep, (j+1) E/ep). SimpleFSDP
//             then shards those over "efsdp" (the dp_shard ranks holding
//             the same experts), where the dense parameters use all of
//             dp_shard (parallelize.h);
//   tokens    every MoE layer gets the token dispatcher of
//             parallelism.expert_dispatcher (nn/token_dispatcher.h): the
//             model code never changes;
//   router    the load-balancing loss's statistics are means over every
//             data-parallel rank's tokens (an all_reduce over "dp"), so the
//             loss, and the router's gradient, are those of one process
//             running the global batch.
// An expert's gradient needs no extra reduction over ep: the ranks' tokens
// reach it through the exchange, whose backward brings their gradients.
// A dense model gets the identity plan.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/dist/mesh.h"
#include "kiln/models/transformer.h"
#include "kiln/nn/token_dispatcher.h"
#include "kiln/ops/collectives.h"

namespace kiln::train {

struct ExpertParallelOptions {
  // auto (local at ep 1, else all_to_all) | local | all_to_all | capacity
  std::string dispatcher = "auto";
  double capacity_factor = 1.25;    // the capacity dispatcher's
};

class ExpertParallelPlan {
 public:
  ExpertParallelPlan() = default;  // a dense model, or none: every function is the identity
  // The plan for the parameters `names` (a CausalLM's, in named_parameters()
  // order) of a model of config `mc` on `mesh`.
  ExpertParallelPlan(const dist::DeviceMesh& mesh, const ModelConfig& mc,
                     std::vector<std::string> names, const ExpertParallelOptions& options);

  bool split() const { return ep_.size > 1; }  // experts divided over ranks
  int64_t degree() const { return ep_.size; }
  // Whether parameter i is an expert weight (sharded over efsdp, not dp_shard).
  bool is_expert(size_t i) const { return i < expert_.size() && expert_[i]; }
  // The dispatcher: "all_to_all", "capacity 1.25", ...; empty for a dense model.
  std::string describe() const;

  // Slices the model's experts to this rank's and installs the dispatcher
  // and the router statistics' reduction. The model must be the plan's.
  void apply(CausalLM& model) const;
  // This rank's experts of full tensors (host side; no communication).
  std::vector<Tensor> shard(const std::vector<Tensor>& full) const;
  std::vector<Shape> local_shapes(std::vector<Shape> full) const;
  // The full tensors from every ep rank's experts (collective).
  std::vector<Tensor> unshard(const std::vector<Tensor>& local) const;

 private:
  Tensor own_experts(const Tensor& all) const;  // this rank's rows of an [E, ...] tensor

  MeshAxis ep_{"ep", 1}, dp_{"dp", 1};
  int64_t rank_ = 0;
  bool moe_ = false;
  std::vector<std::string> names_;
  std::vector<bool> expert_;
  std::shared_ptr<const nn::TokenDispatcher> dispatcher_;
};

}  // namespace kiln::train
