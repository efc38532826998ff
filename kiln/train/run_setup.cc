#include "kiln/train/run_setup.h"

#include "kiln/base/error.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/lora.h"

namespace kiln::train {

RunSetup::RunSetup(const TrainConfig& c, std::shared_ptr<dist::DeviceMesh> m, Device d)
    : config(c),
      mesh(std::move(m)),
      device(d),
      mc(resolve_model_config(c)),
      policy(optim::MixedPrecisionPolicy::from_name(c.training.mixed_precision_param)),
      accum(grad_accum_steps(c, mesh->size("dp"))) {
  KILN_CHECK(c.lora.rank == 0 || mc.router_bias_update_rate == 0, "lora.rank = ", c.lora.rank,
             " with model.router_bias_update_rate = ", mc.router_bias_update_rate,
             ": LoRA freezes the routing biases the rate would move; set the rate to 0");
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
  // The adapters are drawn from a stream of their own (after the base
  // weights, loaded or drawn).
  const LoraOptions lora = lora_options(c);
  Generator lora_rng(uint64_t(c.training.seed) + 1);
  if (lora.rank > 0) add_lora(*f32_model, lora, lora_rng);
  std::vector<std::string> all_names;
  std::vector<Shape> all_shapes;
  std::vector<Tensor> all;
  for (auto& [name, p] : f32_model->named_parameters()) {
    all_names.push_back(name);
    all_shapes.push_back(p->shape());
    all.push_back(p->to(device));
  }
  // Every rank built the full model from the seed: keep its tp slices and experts.
  tp = TensorParallelPlan(*mesh, mc, all_names);
  ep = ExpertParallelPlan(*mesh, mc, all_names,
                          {c.parallelism.expert_dispatcher, c.parallelism.expert_capacity_factor});
  // The model the steps run, in the compute dtype.
  if (policy.param_dtype == DType::f32) {
    model = std::move(f32_model);
  } else {
    model = std::make_unique<CausalLM>(mc, policy.param_dtype);
    if (lora.rank > 0) add_lora(*model, lora, lora_rng);
  }
  tp.apply(*model);
  ep.apply(*model);
  // The steps and evaluations supply its parameters (their scopes): between
  // them it holds stand-ins of the right types and no memory (a zero,
  // expanded), not a second copy of the weights, nor the masters, which
  // the step gives up as it updates them.
  std::vector<Tensor> stand_ins;
  for (const Tensor& p : model->parameters())
    stand_ins.push_back(zeros({}, p.dtype(), device).expand(p.shape()));
  model->set_parameters(stand_ins);
  if (lora.rank == 0) {
    names = std::move(all_names), shapes = std::move(all_shapes);
    dist = std::make_shared<const ParamDistribution>(mesh, shapes, tp, ep);
    masters = dist->from_full(all);
  } else {  // config.cc allows LoRA without tp and ep only
    auto f = std::make_shared<FrozenParams>();
    std::vector<Tensor> frozen_full;
    for (size_t i = 0; i < all.size(); ++i) {
      const bool trained = is_lora_parameter(all_names[i]);
      f->frozen.push_back(!trained);
      if (trained)
        names.push_back(all_names[i]), shapes.push_back(all_shapes[i]), masters.push_back(all[i]);
      else
        f->names.push_back(all_names[i]), f->shapes.push_back(all_shapes[i]),
            frozen_full.push_back(all[i]);
    }
    dist = std::make_shared<const ParamDistribution>(mesh, shapes);
    masters = dist->from_full(masters);
    f->distribution = std::make_shared<const ParamDistribution>(mesh, f->shapes);
    f->shards = f->distribution->from_full(frozen_full);
    frozen = std::move(f);
  }
  all.clear();

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
  so.replay = c.compile.replay;
  so.overlap_collectives = c.compile.overlap_collectives;
  so.distribution = dist;
  so.frozen = frozen;
  step = std::make_unique<TrainStep>(*model, policy, *adamw, so);
}

MemoryEstimate RunSetup::expected_memory(const std::vector<data::Batch>& batches) const {
  return step->expected_memory(masters, state, batches, parse_eager_mode(config.runtime.eager_mode));
}

std::vector<Tensor> RunSetup::model_masters() const {
  return frozen ? frozen->merge(masters, frozen->shards) : masters;
}

std::vector<Tensor> RunSetup::compute_params() const {
  std::vector<Tensor> params = dist->compute_params(masters, policy);
  if (!frozen) return params;
  return frozen->merge(params, frozen->distribution->compute_params(frozen->shards, policy));
}

double RunSetup::flops_per_token() const {
  const int64_t seq_len = config.training.seq_len;
  return frozen ? lora_flops_per_token(mc, seq_len, num_trained_parameters())
                : kiln::flops_per_token(mc, seq_len);
}

int64_t RunSetup::checkpoint_shard_bytes() const {
  const int64_t n = mesh->size("dp_shard");
  int64_t elements = 0;
  for (const Shape& s : shapes)
    if (s[0] > 0) elements += shard_rows(s[0], n) * (s.numel() / s[0]);
  return 3 * elements * int64_t(itemsize(policy.master_dtype));
}

int64_t RunSetup::num_trained_parameters() const {
  int64_t n = 0;
  for (const Shape& s : shapes) n += s.numel();
  return n;
}

}  // namespace kiln::train
