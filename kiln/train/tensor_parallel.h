// Tensor parallelism (Megatron-LM style) as a plan applied to a built
// model, over the mesh's "tp" axis:
//   column-parallel (weight and bias sliced on the output features):
//     self_attn.{q,k,v}_proj (so each rank holds n_heads / tp query heads and
//     n_kv_heads / tp kv heads) and dense layers' mlp.{gate,up}_proj;
//   row-parallel (weight sliced on the input features, partial outputs
//     summed over tp): self_attn.o_proj and mlp.down_proj.
// Everything else (embeddings, norms, lm_head, and MoE layers, whose experts
// expert parallelism splits instead) is replicated; the residual
// stream is replicated, and attention's and the MLP's region entry (one
// each, shared by their column-parallel projections) sums its gradient over
// tp, so replicated parameters get full gradients. Only the
// q/k norms, which act on this rank's heads alone, get partial gradients
// that reduce_grads sums over tp.
//
// The masters of sliced parameters are this rank's slices of the full
// initial weights (which every rank builds identically from the seed);
// SimpleFSDP then shards those further along their dim 0.
#pragma once
#include <string>
#include <vector>

#include "kiln/dist/mesh.h"
#include "kiln/models/transformer.h"
#include "kiln/ops/collectives.h"

namespace kiln::train {

class TensorParallelPlan {
 public:
  TensorParallelPlan() = default;  // tp 1: every function is the identity
  // The plan for the parameters `names` (a CausalLM's, in named_parameters()
  // order) of a model of config `mc` on `mesh`'s "tp" axis.
  TensorParallelPlan(const dist::DeviceMesh& mesh, const ModelConfig& mc,
                     std::vector<std::string> names);

  bool enabled() const { return tp_.size > 1; }
  int64_t degree() const { return tp_.size; }

  // Slices the model's parameters to this rank's parts and sets the
  // parallel style of its projections. The model must be the plan's.
  void apply(CausalLM& model) const;
  // This rank's slices of full tensors (host side; no communication).
  std::vector<Tensor> shard(const std::vector<Tensor>& full) const;
  std::vector<Shape> local_shapes(std::vector<Shape> full) const;
  // The full tensors from every tp rank's slices (collective).
  std::vector<Tensor> unshard(const std::vector<Tensor>& local) const;

  // In the step function (traceable):
  // gradients that are partial over tp (q/k norms) summed over it.
  std::vector<Tensor> reduce_grads(const std::vector<Tensor>& grads) const;
  // This tp group's sum of squared gradients: sliced ones summed over tp,
  // replicated ones counted once.
  Tensor squared_norm(const std::vector<Tensor>& grads) const;

 private:
  struct Rule {
    int64_t dim = -1;           // sliced along this dim; -1: replicated
    bool partial_grad = false;  // replicated, but its gradient is partial
  };
  static Rule rule_for(const std::string& name);
  Tensor slice(const Tensor& full, const Rule& r) const;  // this rank's part

  MeshAxis tp_{"tp", 1};
  int64_t rank_ = 0;
  std::vector<std::string> names_;
  std::vector<Rule> rules_;
};

}  // namespace kiln::train
