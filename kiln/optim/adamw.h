// AdamW (Loshchilov & Hutter) as torch.optim.AdamW computes it, written as
// a pure function of tensors so that it runs eagerly or traces into the
// graph trainer's program:
//
//   p <- p * (1 - lr * wd)                      (decoupled weight decay)
//   m <- m + (1 - beta1) * (g - m)
//   v <- beta2 * v + (1 - beta2) * g * g
//   p <- p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// m and v are f32 (whatever the parameter dtype); gradients are cast to f32
// first. The step's scalars (lr, the bias corrections, each group's decay
// factor) are computed on the host in double and passed as 0-d f32 tensors,
// so a compiled update takes them as inputs and never recompiles as the
// learning rate changes.
//
// Parameter groups: each parameter belongs to one group with its own weight
// decay (and learning-rate multiplier); by default norms, biases and
// embeddings skip decay (see default_param_groups).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::optim {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
};

struct ParamGroup {
  double weight_decay = 0.0;
  double lr_scale = 1.0;
};

// group[i] is the group of parameter i.
struct ParamGroups {
  std::vector<ParamGroup> groups;
  std::vector<int> group;
};

// Two groups: 0 = decayed (weight_decay), 1 = not decayed. Unless
// decay_norms_and_embeddings, a parameter skips decay when it has fewer than
// 2 dims (norm weights, biases) or its name ends in "embed_tokens.weight"
// (kiln's / HF's token embedding).
ParamGroups default_param_groups(const std::vector<std::string>& names,
                                 const std::vector<Tensor>& params, double weight_decay,
                                 bool decay_norms_and_embeddings = false);

struct AdamWState {
  int64_t step = 0;           // updates done so far
  std::vector<Tensor> m, v;   // f32, shaped like the parameters
};

// The per-step scalars, 0-d f32 tensors (inputs of a compiled update).
struct AdamWScalars {
  Tensor bias_correction2_sqrt;       // sqrt(1 - beta2^t)
  std::vector<Tensor> step_size;      // per group: lr_g / (1 - beta1^t), lr_g = lr * lr_scale
  std::vector<Tensor> decay;          // per group: 1 - lr_g * weight_decay
};

struct AdamWUpdate {
  std::vector<Tensor> params;
  AdamWState state;
};

class AdamW {
 public:
  // Every parameter in one group with options.weight_decay.
  AdamW(AdamWOptions options, size_t num_params);
  AdamW(AdamWOptions options, ParamGroups groups);

  const AdamWOptions& options() const { return options_; }
  const ParamGroups& groups() const { return groups_; }

  // Zero moments for `params`.
  AdamWState init(const std::vector<Tensor>& params) const;
  // Scalars for update number `step` (1-based: the state's step + 1) at `lr`.
  // On `device`, the parameters' (a step's inputs share one device).
  AdamWScalars scalars(int64_t step, double lr, Device device = kCPU) const;
  // One update with precomputed scalars (traceable: tensors in, tensors out;
  // the state's step is carried through + 1). Parameters keep their dtype:
  // the update is computed in f32 and rounded back. Parameters, gradients
  // and moments moved in are dropped one by one as their updates are
  // issued, so in eager mode each is freed then, as a program's memory plan
  // frees it, and the old and the new state are never held whole together.
  AdamWUpdate update(std::vector<Tensor> params, std::vector<Tensor> grads, AdamWState state,
                     const AdamWScalars& scalars) const;
  // update() with scalars(state.step + 1, lr).
  AdamWUpdate update(std::vector<Tensor> params, std::vector<Tensor> grads, AdamWState state,
                     double lr) const;

 private:
  AdamWOptions options_;
  ParamGroups groups_;
};

// Checkpoint form: tensors "<prefix>m.<name>", "<prefix>v.<name>" and JSON
// {"step": N, "beta1", "beta2", "eps", "weight_decay"}; loading checks that
// every parameter name is present with its shape, naming what is missing.
NamedTensors adamw_state_tensors(const AdamWState& state, const std::vector<std::string>& names,
                                 const std::string& prefix = "optim.");
AdamWState adamw_state_from_tensors(const std::map<std::string, Tensor>& tensors, int64_t step,
                                    const std::vector<std::string>& names,
                                    const std::vector<Tensor>& params,
                                    const std::string& prefix = "optim.");
nlohmann::json adamw_state_json(const AdamWState& state, const AdamWOptions& options);

}  // namespace kiln::optim
