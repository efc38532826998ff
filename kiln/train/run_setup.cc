#include "kiln/train/run_setup.h"

#include "kiln/base/error.h"
#include "kiln/models/hf_dir.h"

namespace kiln::train {

RunSetup::RunSetup(const TrainConfig& c, std::shared_ptr<dist::DeviceMesh> m)
    : config(c),
      mesh(std::move(m)),
      mc(resolve_model_config(c)),
      policy(optim::MixedPrecisionPolicy::from_name(c.training.mixed_precision_param)),
      accum(grad_accum_steps(c, mesh->size("dp"))) {
  KILN_CHECK(!c.checkpoint.last_save_in_hf || mc.router_bias_update_rate == 0,
             "checkpoint.last_save_in_hf with model.router_bias_update_rate = ",
             mc.router_bias_update_rate, ": Hugging Face's Qwen3-MoE has no routing bias, so the "
             "exported model would route differently from the trained one; turn one of them off");
}

void RunSetup::build(bool load_initial_weights) {
  const TrainConfig& c = config;
  std::unique_ptr<CausalLM> f32_model = build_model(mc, DType::f32, uint64_t(c.training.seed));
  if (load_initial_weights && !c.checkpoint.initial_load_path.empty())
    load_hf_weights(*f32_model, c.checkpoint.initial_load_path);
  for (auto& [name, p] : f32_model->named_parameters()) {
    names.push_back(name);
    shapes.push_back(p->shape());
    masters.push_back(*p);
  }
  // Every rank built the full model from the seed: keep its tp slices and experts.
  tp = TensorParallelPlan(*mesh, mc, names);
  ep = ExpertParallelPlan(*mesh, mc, names,
                          {c.parallelism.expert_dispatcher, c.parallelism.expert_capacity_factor});
  dist = std::make_shared<const ParamDistribution>(mesh, shapes, tp, ep);
  // The model the steps run; its parameters are replaced by the (cast)
  // masters in every step, so a bf16 copy starts as zeros.
  model = policy.param_dtype == DType::f32 ? std::move(f32_model)
                                           : std::make_unique<CausalLM>(mc, policy.param_dtype);
  tp.apply(*model);
  ep.apply(*model);
  masters = dist->from_full(masters);

  optim::AdamWOptions ao;
  ao.beta1 = c.optimizer.beta1;
  ao.beta2 = c.optimizer.beta2;
  ao.eps = c.optimizer.eps;
  ao.weight_decay = c.optimizer.weight_decay;
  router_bias = std::make_unique<RouterBiasBalancer>(names, mc.router_bias_update_rate);
  optim::ParamGroups groups = optim::default_param_groups(
      names, masters, ao.weight_decay, c.optimizer.decay_norms_and_embeddings);
  router_bias->exclude_from_optimizer(groups);
  adamw = std::make_unique<optim::AdamW>(ao, std::move(groups));
  state = adamw->init(masters);

  StepOptions so;
  so.rung = c.compile.graph_trainer ? Rung::graph_trainer
            : c.compile.enable      ? Rung::per_block_compile
                                    : Rung::eager;
  so.microbatches = accum;
  so.document_mask = c.data.document_mask;
  so.max_norm = c.training.max_norm;
  so.remat = compiler::parse_remat_policy(c.activation_checkpoint.mode);
  so.scan_layers = c.compile.scan_layers;
  if (c.compile.graph_split) so.graph_split = c.compile.graph_split_layers;
  so.background_compile = c.compile.background;
  so.overlap_collectives = c.compile.overlap_collectives;
  so.distribution = dist;
  step = std::make_unique<TrainStep>(*model, policy, *adamw, so);
}

}  // namespace kiln::train
