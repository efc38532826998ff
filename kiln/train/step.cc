#include "kiln/train/step.h"

#include <algorithm>
#include <numeric>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/compiler/memory_plan.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/compiler/remat.h"
#include "kiln/nn/module.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"
#include "kiln/optim/accumulate.h"
#include "kiln/optim/clip.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/defer_regions.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/graph_runner.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/segmented_program.h"
#include "kiln/runtime/spmd.h"

namespace kiln::train {
namespace {

// The step function's arguments, in order (np: tensors of the step's layout,
// one per parameter or with the layers stacked):
//   masters[np], m[np], v[np], sqrt(1 - beta2^t), step_size[groups], decay[groups],
//   then per microbatch: ids, targets (+ doc_ids, positions with the document mask),
//   then the frozen parameters' shards (StepOptions::frozen).
// Its results: loss per microbatch, the gradient norm, masters[np], m[np], v[np],
// then for MoE models the step's tokens per expert [layers, experts] and
// dropped assignments (summed over the microbatches and the dp ranks).
size_t batch_width(const StepOptions& o) { return o.document_mask ? 4 : 2; }

// The bytes a buffer of `bytes` takes: a block in the allocator's size class.
int64_t block(int64_t bytes) { return bytes > 0 ? int64_t(CachingAllocator::round_size(size_t(bytes))) : 0; }

// How per-block compile builds and runs each block's programs.
ProgramOptions block_programs(const StepOptions& o) {
  return ProgramOptions{default_pass_options(), {}, "program", o.replay};
}

}  // namespace

TrainStep::TrainStep(CausalLM& model, optim::MixedPrecisionPolicy policy,
                     const optim::AdamW& adamw, StepOptions options)
    : model_(model),
      policy_(policy),
      adamw_(adamw),
      options_(options),
      dist_(options.distribution ? options.distribution
                                 : std::make_shared<const ParamDistribution>()),
      frozen_(options.frozen) {
  KILN_CHECK(options_.microbatches >= 1, "training step: ", options_.microbatches,
             " microbatches; need at least 1");
  if (options_.scan_layers && dist_->local() && !frozen_) {
    std::vector<std::string> names;
    std::vector<ir::TypeInfo> types;
    for (const auto& [name, p] : model_.named_parameters())
      names.push_back(name), types.push_back(p->type());
    stacking_ = LayerStacking::plan(names, types, adamw_.groups());
    if (stacking_) stacked_adamw_.emplace(adamw_.options(), stacking_->groups(adamw_.groups()));
  }
  if (options_.rung != Rung::graph_trainer) return;
  CompileOptions co;
  co.name = "graph trainer step";
  co.passes.overlap_collectives = options_.overlap_collectives;
  co.graph_split = options_.graph_split;
  co.compile_in_background = options_.background_compile;
  co.replay = options_.replay;
  // Masters, m and v: the program writes their updates into their buffers.
  co.donate.resize(3 * step_adamw().groups().group.size());
  std::iota(co.donate.begin(), co.donate.end(), 0);
  compiled_.emplace([this](const std::vector<Tensor>& args) { return step_function(args); }, co);
}

std::vector<Tensor> TrainStep::step_function(std::vector<Tensor> args) const {
  const size_t np = step_adamw().groups().group.size(), ng = adamw_.groups().groups.size();
  const size_t width = batch_width(options_);
  const auto begin = args.begin();
  // Moved out of the arguments: the update drops each as it is issued.
  std::vector<Tensor> masters(std::make_move_iterator(begin), std::make_move_iterator(begin + long(np)));
  optim::AdamWState state;
  state.m.assign(std::make_move_iterator(begin + long(np)), std::make_move_iterator(begin + long(2 * np)));
  state.v.assign(std::make_move_iterator(begin + long(2 * np)),
                 std::make_move_iterator(begin + long(3 * np)));
  optim::AdamWScalars scalars;
  size_t next = 3 * np;
  scalars.bias_correction2_sqrt = args[next++];
  scalars.step_size.assign(begin + long(next), begin + long(next + ng));
  scalars.decay.assign(begin + long(next + ng), begin + long(next + 2 * ng));
  next += 2 * ng;

  // The frozen parameters in the compute dtype, gathered once for the
  // step's microbatches; read, not differentiated.
  std::vector<Tensor> frozen;
  if (frozen_) {
    const size_t nf = frozen_->shards.size();
    frozen = frozen_->distribution->compute_params(
        std::vector<Tensor>(args.end() - long(nf), args.end()), policy_);
  }

  GradOptions grad_options;
  grad_options.remat = options_.remat;
  if (options_.rung == Rung::per_block_compile)
    grad_options.compile_regions = block_programs(options_);
  const bool doc_mask = options_.document_mask;
  auto loss_and_grads = value_and_grad(
      [&](const std::vector<Tensor>& a) {
        std::vector<Tensor> params =
            dist_->compute_params(std::vector<Tensor>(a.begin(), a.begin() + long(np)), policy_);
        if (frozen_) params = frozen_->merge(params, frozen);
        ForwardOptions fo;
        fo.scan_layers = options_.scan_layers;
        if (stacking_) {
          fo.stacked_layers = stacking_->layer_stacks(params);
          params = stacking_->scope_values(params);
        }
        nn::ParameterScope scope(model_, params, /*allow_unset=*/stacking_.has_value());
        if (doc_mask) fo.doc_ids = a[np + 2], fo.positions = a[np + 3];
        LMOutput out = model_.forward(a[np], a[np + 1], fo);
        if (out.expert_counts.empty()) return std::vector<Tensor>{out.loss};
        return std::vector<Tensor>{out.loss, stack(out.expert_counts), out.dropped};
      },
      grad_options);

  std::vector<Tensor> results;
  std::vector<Tensor> grads, routed;  // routed: tokens per expert, dropped
  std::optional<optim::GradAccumulator> accumulator;
  if (options_.microbatches > 1) accumulator.emplace(options_.microbatches);
  for (int64_t mb = 0; mb < options_.microbatches; ++mb, next += width) {
    std::vector<Tensor> a = masters;
    a.insert(a.end(), begin + long(next), begin + long(next + width));
    ValueAndGrad r = loss_and_grads(a);
    results.push_back(dist_->mean_loss(r.values[0]));
    if (mb == 0)
      routed.assign(r.values.begin() + 1, r.values.end());
    else
      for (size_t k = 1; k < r.values.size(); ++k) routed[k - 1] = routed[k - 1] + r.values[k];
    grads.assign(r.grads.begin(), r.grads.begin() + long(np));
    if (accumulator) accumulator->add(grads);
  }
  if (accumulator) grads = accumulator->take();
  grads = dist_->reduce_grads(grads);
  Tensor stacked_norm = stacking_ ? stacking_->global_norm(grads) : Tensor();
  optim::ClipResult clip = stacking_
                               ? optim::clip_to_norm(std::move(grads), stacked_norm, options_.max_norm)
                               : dist_->clip(std::move(grads), options_.max_norm);
  optim::AdamWUpdate u =
      step_adamw().update(std::move(masters), std::move(clip.grads), std::move(state), scalars);
  results.push_back(clip.norm);
  for (const auto* list : {&u.params, &u.state.m, &u.state.v})
    results.insert(results.end(), list->begin(), list->end());
  for (const Tensor& t : routed) results.push_back(dist_->sum_over_dp(t));
  return results;
}

std::vector<Tensor> TrainStep::per_param_args(const std::vector<Tensor>& masters,
                                              const optim::AdamWState& state,
                                              const std::vector<data::Batch>& batches,
                                              double lr) const {
  KILN_CHECK(masters.size() == adamw_.groups().group.size(), "training step: ", masters.size(),
             " parameters, but the optimizer has ", adamw_.groups().group.size());
  KILN_CHECK(int64_t(batches.size()) == options_.microbatches, "training step: ", batches.size(),
             " microbatches, expected ", options_.microbatches);
  optim::AdamWScalars scalars = adamw_.scalars(state.step + 1, lr, masters[0].device());
  std::vector<Tensor> args;
  for (const auto* list : {&masters, &state.m, &state.v})
    args.insert(args.end(), list->begin(), list->end());
  args.push_back(scalars.bias_correction2_sqrt);
  args.insert(args.end(), scalars.step_size.begin(), scalars.step_size.end());
  args.insert(args.end(), scalars.decay.begin(), scalars.decay.end());
  for (const data::Batch& b : batches) {
    args.push_back(b.ids);
    args.push_back(b.targets);
    if (options_.document_mask) args.push_back(b.doc_ids), args.push_back(b.positions);
  }
  if (frozen_) args.insert(args.end(), frozen_->shards.begin(), frozen_->shards.end());
  return args;
}

// Stacks one list of per-parameter tensors. When that copies (a first step,
// or after a checkpoint load), the queued copies hold the per-parameter
// buffers until they run: wait for them, so that only one list is ever
// held twice.
std::vector<Tensor> TrainStep::stack_list(std::vector<Tensor> per_param) const {
  bool copied = false;
  std::vector<Tensor> stacked = stacking_->stack(per_param, &copied);
  per_param.clear();
  if (copied) synchronize(stacked[0].device());
  return stacked;
}
std::vector<ir::TypeInfo> TrainStep::stack_list(std::vector<ir::TypeInfo> per_param) const {
  return stacking_->stack(per_param);
}

// The arguments' masters, m and v (the first 3 np) in the stacked layout;
// the per-parameter handles are dropped as each list is stacked.
template <class T>
std::vector<T> TrainStep::to_step_layout(std::vector<T> per_param) const {
  if (!stacking_) return per_param;
  const size_t np = adamw_.groups().group.size();
  std::vector<T> out;
  for (size_t k = 0; k < 3; ++k) {
    auto first = per_param.begin() + long(k * np);
    std::vector<T> list(first, first + long(np));
    std::fill(first, first + long(np), T{});
    std::vector<T> part = stack_list(std::move(list));
    out.insert(out.end(), part.begin(), part.end());
  }
  out.insert(out.end(), per_param.begin() + long(3 * np), per_param.end());
  return out;
}

std::vector<ir::TypeInfo> TrainStep::step_arg_types(const std::vector<Tensor>& masters,
                                                    const optim::AdamWState& state,
                                                    const std::vector<data::Batch>& batches) const {
  return to_step_layout(types_of(per_param_args(masters, state, batches, 0.0)));
}

MemoryEstimate TrainStep::expected_memory(const std::vector<Tensor>& masters,
                                          const optim::AdamWState& state,
                                          const std::vector<data::Batch>& batches,
                                          EagerMode mode) const {
  const Device device = masters[0].device();
  ir::Graph g = prepare_for_device(graph(masters, state, batches), device);
  MemoryEstimate e;
  // Before optimization, whose fusions do not keep the model's regions.
  if (std::optional<int64_t> kept = compiler::kept_activation_bytes(g))
    e.activations = *kept / options_.microbatches;
  // Arguments: masters, m, v (np each), then the scalars and the batches.
  const size_t np = step_adamw().groups().group.size();
  // The graph trainer's program writes the updates into the donated buffers
  // of masters, m and v (arguments 0..3np-1 -> results M+1..M+3np).
  std::vector<std::pair<int, int>> donated;
  for (int i = 0; i < int(3 * np); ++i) donated.push_back({i, int(options_.microbatches) + 1 + i});
  std::optional<int64_t> held_between;  // replayed segments: the values between them
  if (options_.rung == Rung::graph_trainer) {
    compiler::PassOptions passes = default_pass_options();
    passes.overlap_collectives = options_.overlap_collectives;
    // Run as segments (a graph split, skinny collectives) and replayed, each
    // segment's recordings keep buffers of their own; one program's
    // recording keeps the arena counted below.
    std::optional<NodeRanges> segments;
    if (options_.replay) segments = program_segments(g, options_.graph_split, spmd_safe());
    if (segments) {
      const ProgramOptions po{passes, donated, "graph trainer step", true};
      const PoolBytes kept = SegmentedProgram::replay_buffer_bytes(g, *segments, device, po);
      e.recordings = kept.device;
      e.offloaded += kept.offload;
      held_between = SegmentedProgram::held_between_bytes(g, *segments, po, block);
    }
    g = compiler::optimize(g, passes);
  }
  std::vector<ir::TypeInfo> args = step_arg_types(masters, state, batches);
  const size_t first_frozen = args.size() - (frozen_ ? frozen_->shards.size() : 0);
  std::vector<int64_t> arg_bytes;
  for (const ir::TypeInfo& t : args) arg_bytes.push_back(t.shape.numel() * int64_t(itemsize(t.dtype)));
  for (size_t i = 0; i < args.size(); ++i)
    (i < np || i >= first_frozen ? e.params : i < 3 * np ? e.optimizer_state : e.batch) += arg_bytes[i];
  // The step differentiates the masters (not the frozen parameters).
  for (size_t i = 0; i < np; ++i) e.gradients += arg_bytes[i];
  if (options_.rung == Rung::graph_trainer) {
    // The program takes each arena as one block, in the size class the
    // allocator rounds it up to, and a kernel's scratch (in blocks) beside it.
    const int64_t most_scratch = most_kernel_scratch(g, device);
    compiler::MemoryPlan plan = compiler::plan_memory(g, donated);
    // Replayed segments compute in their recordings' arenas and scratch
    // (counted in e.recordings), the values passed between them alone
    // taken anew each step.
    e.computed = held_between ? *held_between : block(plan.peak_bytes) + most_scratch;
    e.offloaded += block(plan.offload_peak_bytes);
  } else {
    // The step gives the masters, m and v up, each going after its update:
    // the peaks count them until then, and what is not theirs is computed.
    std::vector<int> released(3 * np);
    std::iota(released.begin(), released.end(), 0);
    const bool replayed_blocks = options_.rung == Rung::per_block_compile && options_.replay;
    const NodeRanges blocks =
        options_.rung == Rung::per_block_compile ? region_programs(g, spmd_safe()) : NodeRanges{};
    if (mode == EagerMode::defer_and_fuse) {
      // Each region is a program holding its inputs and its values until
      // it ends; the values passed between regions are taken one by one.
      NodeRanges regions = deferred_regions(g, spmd_safe(), blocks);
      std::vector<bool> recorded(regions.size(), false);
      if (replayed_blocks)
        for (size_t r = 0; r < regions.size(); ++r)
          recorded[r] = std::find(blocks.begin(), blocks.end(), regions[r]) != blocks.end();
      const ir::Graph deferred = with_views_passed_as_roots(g, regions);
      const PoolBytes peak = SegmentedProgram::run_peak_bytes(
          deferred, regions, device, ProgramOptions{default_pass_options(), {}, "deferred ops"}, block,
          released, recorded);
      e.computed = peak.device;
      e.offloaded = peak.offload;
    } else {
      // Values are taken one by one as the nodes run, each a block of the
      // allocator's, a kernel's scratch with them. A replayed block
      // program's kernels take their scratch from its recordings' private
      // pool (counted in e.recordings).
      std::vector<int64_t> scratch = kernel_scratch_bytes(g, device);
      if (replayed_blocks)
        for (auto [begin, end] : blocks)
          std::fill(scratch.begin() + long(begin), scratch.begin() + long(end), 0);
      compiler::PlanOptions planning;
      planning.node_scratch = scratch;
      planning.buffer_bytes = block;
      planning.released_inputs = released;
      int64_t freed = 0;
      for (int i : released) freed += block(arg_bytes[size_t(i)]);
      compiler::MemoryPlan plan = compiler::plan_memory(g, {}, planning);
      e.computed = plan.live_peak_bytes - freed;
      e.offloaded = plan.offload_live_peak_bytes;
    }
    if (replayed_blocks) {
      const PoolBytes kept =
          region_replay_buffer_bytes(g, device, block_programs(options_), spmd_safe());
      e.recordings = kept.device;
      e.offloaded += kept.offload;
    }
  }
  return e;
}

ir::Graph TrainStep::graph(const std::vector<Tensor>& masters, const optim::AdamWState& state,
                           const std::vector<data::Batch>& batches) const {
  return trace([this](const std::vector<Tensor>& a) { return step_function(a); },
               step_arg_types(masters, state, batches), masters[0].device())
      ->graph;
}

StepResult TrainStep::run(std::vector<Tensor>& masters, optim::AdamWState& state,
                          const std::vector<data::Batch>& batches, double lr) {
  const size_t np = step_adamw().groups().group.size();
  std::vector<Tensor> args = per_param_args(masters, state, batches, lr);
  // The step takes the masters, m and v over (the program rewrites their
  // buffers; op by op, each goes once its update is issued): drop every
  // other handle first.
  masters.clear(), state.m.clear(), state.v.clear();
  args = to_step_layout(std::move(args));
  std::vector<Tensor> out = compiled_ ? (*compiled_)(std::move(args)) : step_function(std::move(args));

  const size_t mbs = size_t(options_.microbatches);
  StepResult r;
  for (size_t i = 0; i < mbs; ++i) r.loss += out[i].item<float>();
  r.loss /= double(mbs);
  // Reading the norm waits for the update (and, deferred, runs it).
  r.grad_norm = out[mbs].item<float>();
  auto part = [&](size_t k) {
    auto first = out.begin() + long(mbs + 1 + k * np);
    std::vector<Tensor> p(first, first + long(np));
    return stacking_ ? stacking_->unstack(p) : p;
  };
  masters = part(0);
  state.m = part(1);
  state.v = part(2);
  state.step += 1;
  if (out.size() == mbs + 1 + 3 * np + 2) {
    const Tensor& counts = out[mbs + 1 + 3 * np];  // [layers, experts]
    std::vector<int64_t> all = counts.to_vector<int64_t>();
    for (int64_t l = 0; l < counts.dim(0); ++l)
      r.expert_tokens.emplace_back(all.begin() + l * counts.dim(1),
                                   all.begin() + (l + 1) * counts.dim(1));
    r.dropped_tokens = out.back().item<int64_t>();
  }
  return r;
}

const Executable* TrainStep::program() const {
  return compiled_ && compiled_->num_signatures() > 0 ? &compiled_->last_executable() : nullptr;
}

}  // namespace kiln::train
