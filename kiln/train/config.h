// The training configuration: one typed struct per section, filled from a
// TOML recipe and `--section.key=value` flags, in that order. Section and key
// names follow TorchTitan's where one exists (job.dump_folder,
// training.steps, checkpoint.interval, compile.enable, ...).
//
// Every key is declared once, in config.cc's field table or, for the
// model's overridable fields, in kiln/models/model_fields.h; the table
// drives parsing, the errors (an unknown key names the nearest valid one, a
// bad value the accepted ones) and printing (`kiln train --print-config`).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/models/config.h"
#include "kiln/models/model_fields.h"

namespace kiln {
struct LoraOptions;  // kiln/models/lora.h
}  // namespace kiln

namespace kiln::train {

struct JobSection {
  std::string dump_folder = "./outputs";  // every output of a run: checkpoints, metrics, tb
  std::string description;
};

// The model: a registry name (kiln/models/config.h) and, per overridable
// field (kiln/models/model_fields.h: model.dim, model.attention_impl, ...),
// an optional change to that config. After load_train_config every change
// is set (to the registry's value where the recipe left it), so the printed
// config is the model actually trained.
struct ModelSection {
  std::string name = "llama3_debug";
  // A tokenizer.json (or a folder holding one). Empty: a byte-level BPE of
  // vocab_size is learned from the training data when the run starts and
  // kept in the dump folder (<dump_folder>/tokenizer.json), where a resumed
  // run finds it again.
  std::string tokenizer_path;
  // A Hugging Face folder to fine-tune: checkpoint.initial_load_path's
  // other name (architecture, weights and tokenizer come from it).
  std::string hf_dir;
  // Component implementations among them are swapped before the model is
  // built (also `--override attention=flash`).
  ModelChanges changes;
};

struct TrainingSection {
  int64_t steps = 10000;
  int64_t seed = 0;  // weights, data order
  int64_t local_batch_size = 8;
  // Samples per optimizer step; a multiple of local_batch_size, the
  // quotient being the gradient-accumulation steps. -1: local_batch_size.
  int64_t global_batch_size = -1;
  int64_t seq_len = 2048;
  double max_norm = 1.0;  // gradient clipping by global norm; <= 0 disables it
  // Compute dtype of the parameters; with bfloat16 the optimizer keeps f32
  // master weights and state and the model runs on a bf16 copy.
  std::string mixed_precision_param = "float32";  // float32 | bfloat16
  // Where the run computes: cpu, cuda or cuda:N (run_device.h; under mpirun
  // a bare kind is each rank's own device).
  std::string device = "cpu";
};

struct OptimizerSection {
  std::string name = "AdamW";
  double lr = 8e-4;
  double beta1 = 0.9, beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  // Whether norm weights, biases and the token embedding get weight decay too.
  bool decay_norms_and_embeddings = false;
};

// Warmup, then an optional stable phase, then decay to min_lr_factor * lr
// (warmup-stable-decay when decay_ratio is set).
struct LRSchedulerSection {
  int64_t warmup_steps = 200;
  // Fraction of training spent decaying at the end; unset: every step after warmup.
  std::optional<double> decay_ratio;
  std::string decay_type = "linear";  // linear | cosine | sqrt | constant
  double min_lr_factor = 0.0;
};

struct DataSection {
  // A file or folder: plain text, JSONL, or `kiln data prepare` shards.
  // Empty: the default corpus scripts/setup.sh installs (kiln/data/default_corpus.h).
  std::string path;
  // auto | text | jsonl | shards | chat. chat: JSONL conversations
  // ({"messages": [...]}) rendered with the tokenizer's chat template (its
  // tokenizer_config.json), each kept whole in one window (never cut;
  // training.seq_len + 1 tokens at most), the template placing the special
  // tokens (add_bos and add_eos do not apply).
  std::string format = "auto";
  // chat: the tokens the loss is taken on: completion (the assistant's), prompt or all.
  std::string train_on = "completion";
  std::string text_key = "text";    // the JSONL field holding the text
  std::string text_split = "file";  // plain text documents: file | paragraph | line | delimiter
  std::string delimiter = "%";      // text_split = delimiter: the separator line
  double val_fraction = 0.01;       // documents held out for validation (always, so the
                                    // training data does not depend on validation.enable)
  bool add_bos = true, add_eos = true;
  bool shuffle = true;  // a fresh document order each epoch
  // Attention only within each packed document, positions restarting at
  // each (the packed-document mask); false: plain causal over the window.
  bool document_mask = false;
};

struct CheckpointSection {
  bool enable = false;
  std::string folder = "checkpoint";  // relative to job.dump_folder
  int64_t interval = 500;             // steps between saves (and one at the end)
  // Resume from this step's checkpoint; -1: the latest complete one, if any.
  int64_t load_step = -1;
  int64_t keep_latest_k = 10;  // 0 keeps every checkpoint
  // disabled: a save holds training until it is on disk; async: the step's
  // tensors are copied to host memory and written on a thread while
  // training goes on (one save at a time; the run's end waits for it).
  std::string async_mode = "disabled";  // disabled | async
  // A save's (or a resume's) collectives wait this long for the slowest
  // rank's writes (reads) before they fail: longer than comm.timeout_seconds,
  // because writing a rank's shards to slow storage can take minutes.
  double timeout_seconds = 1800;
  // A Hugging Face model folder whose weights initialise a fresh run.
  std::string initial_load_path;
  // At the end, also export the model as a Hugging Face folder
  // (<folder>/hf: safetensors, config.json, tokenizer.json).
  bool last_save_in_hf = false;
  // auto: the initial_load_path folder's (bfloat16 stays bfloat16), else float32.
  std::string export_dtype = "auto";  // auto | float32 | bfloat16
};

// LoRA (kiln/models/lora.h): adapters on the targets' Linear layers are
// trained, every other weight is frozen (no gradient, no optimizer state).
struct LoraSection {
  int64_t rank = 0;  // 0: no LoRA, the whole model trains
  double alpha = 16;  // the adapters' output is scaled by alpha / rank
  std::string targets = "q,k,v,o";  // of q, k, v, o, gate, up, down
};

struct ValidationSection {
  bool enable = false;
  int64_t freq = 100;  // steps between evaluations (and one at the end)
  int64_t steps = 10;  // validation batches per evaluation; -1: the whole split
};

struct MetricsSection {
  int64_t log_freq = 10;  // steps between logged lines (the first and last are always logged)
  bool enable_tensorboard = true;
  std::string save_tb_folder = "tb";  // relative to job.dump_folder
  bool progress_bar = true;           // only drawn when stderr is a terminal
};

// The execution ladder above the eager modes (runtime.eager_mode):
//   enable         per-block compile: each transformer block's forward and
//                  backward run as compiled programs, one per block shape,
//                  shared by every layer through the program cache;
//   graph_trainer  the whole step (forward, loss, backward, clipping, AdamW)
//                  as one program, parameters and optimizer state donated;
//   scan_layers    the decoder stack as one loop body over stacked
//                  per-layer weights, so compile time and program size do
//                  not grow with depth;
//   spmd_safe      every rank runs the same step, so its collectives may
//                  stay inside the fused programs (kiln/runtime/spmd.h);
//                  off, each collective is a program of its own.
// overlap_collectives: compiled programs start their collectives early and
// wait for them late, so communication overlaps compute
// (kiln/compiler/collective_schedule.h); off, each blocks where it is traced.
struct CompileSection {
  bool enable = false;
  bool graph_trainer = false;  // recipes/default.toml turns it on
  // The graph trainer's step as separately compiled forward and backward
  // programs, a pair per group of graph_split_layers layers (0: one pair
  // for all layers); kiln/runtime/segmented_program.h.
  bool graph_split = false;
  int64_t graph_split_layers = 0;
  // The graph trainer's step program compiles on the compile pool while the
  // first steps run op by op (the same bits); false: step 1 waits for it.
  // Off by default: on a CPU, compiling a step's program takes less time
  // than running the step op by op instead (README, "The execution ladder").
  bool background = false;
  bool scan_layers = false;
  bool spmd_safe = false;
  bool overlap_collectives = true;
  // The compiled programs (per-block or the graph trainer's) are recorded
  // once per set of buffers and replayed: on CUDA each is one CUDA graph
  // launch, no host work between its kernels (kiln/runtime/executable.h).
  // A program that cannot be recorded (all_to_all_v on CUDA) runs launch by
  // launch, and the trainer says why.
  bool replay = false;
};

// Mesh degrees as in TorchTitan (-1: whatever the others leave), for runs
// started by `mpirun -n N kiln train`: their product is N. The trainer runs
// data parallelism (dp_replicate x dp_shard: DDP, SimpleFSDP, HSDP), tensor
// parallelism and expert parallelism (its ranks borrowed from dp_shard, as
// in TorchTitan: expert_parallel_degree divides data_parallel_shard_degree),
// and refuses context and pipeline degrees above 1 (trainer.cc,
// check_supported).
struct ParallelismSection {
  int64_t data_parallel_replicate_degree = 1;
  int64_t data_parallel_shard_degree = -1;
  int64_t tensor_parallel_degree = 1;
  int64_t context_parallel_degree = 1;
  int64_t pipeline_parallel_degree = 1;
  int64_t expert_parallel_degree = 1;
  // How MoE layers move tokens to their experts (kiln/nn/token_dispatcher.h):
  // auto (local at expert degree 1, else all_to_all), local, all_to_all
  // (dropless) or capacity (static shapes: expert_capacity_factor x the
  // even share of slots per expert; the excess dropped and counted).
  std::string expert_dispatcher = "auto";
  double expert_capacity_factor = 1.25;
};

// Communication between the ranks of an mpirun job.
struct CommSection {
  // A collective that has not completed after this long fails, naming the
  // collective, its group and the ranks that did not arrive.
  double timeout_seconds = 300;
};

struct ActivationCheckpointSection {
  std::string mode = "none";  // none | full | selective | offload (compiler/remat.h)
};

// Every profile_freq steps, a trace of the last active_steps of them
// (<dump_folder>/<save_traces_folder>/step-N/trace.json; kiln/train/profiler.h).
struct ProfilerSection {
  bool enable_profiling = false;
  std::string save_traces_folder = "profile_traces";
  int64_t profile_freq = 100;
  int64_t active_steps = 3;
};

struct RuntimeSection {
  std::string eager_mode = "strict";  // strict | debug | defer_and_fuse
  // Kernel threads; 0: KILN_NUM_THREADS, else the cores (shared by a host's mpirun ranks).
  int64_t num_threads = 0;
};

struct TrainConfig {
  JobSection job;
  ModelSection model;
  TrainingSection training;
  OptimizerSection optimizer;
  LRSchedulerSection lr_scheduler;
  DataSection data;
  CheckpointSection checkpoint;
  LoraSection lora;
  ValidationSection validation;
  MetricsSection metrics;
  CompileSection compile;
  ParallelismSection parallelism;
  CommSection comm;
  ActivationCheckpointSection activation_checkpoint;
  ProfilerSection profiler;
  RuntimeSection runtime;
};

// Every key, "section.key", in declaration order.
std::vector<std::string> config_keys();

// Applies a TOML recipe (`origin` names it in errors, e.g. its path).
void apply_toml(TrainConfig& config, std::string_view toml_text, const std::string& origin);
// Applies one setting, "section.key" = value (as written on the command line).
void apply_setting(TrainConfig& config, std::string_view key, std::string_view value);
// Applies "component=impl" (or "model.component=impl"): sets the model
// field whose registry is that component's (model_fields(): attention, ...).
void apply_override(TrainConfig& config, std::string_view spec);
// The components and their registered implementations, for help texts:
// "attention=composite|flash, loss=composite|fused_ce, ...".
std::string component_choices();
// Fills the model section's unset fields from the registry and checks the
// values against each other; throws kiln::Error naming the key.
void finalize(TrainConfig& config);

// The effective config as a TOML recipe that apply_toml reads back.
std::string to_toml(const TrainConfig& config);

// The ModelConfig to build: the registry entry with the model section's
// changes (or, with checkpoint.initial_load_path, its folder's config.json
// checked against them: train/initial_model.h) and the training sequence
// length.
ModelConfig resolve_model_config(const TrainConfig& config);
// The same with `architecture` in place of the folder's config.json (what a
// fine-tune's checkpoint records); `source` names it in errors.
ModelConfig resolve_model_config(const TrainConfig& config, const ModelConfig& architecture,
                                 const std::string& source);
// The [lora] section as kiln/models/lora.h's options (rank 0: no LoRA).
LoraOptions lora_options(const TrainConfig& config);
// Microbatches per optimizer step when the global batch is split over
// `dp_degree` data-parallel ranks (training.global_batch_size = local batch
// x dp_degree x microbatches, as in TorchTitan); kiln::Error when it does not divide.
int64_t grad_accum_steps(const TrainConfig& config, int64_t dp_degree = 1);
// Checkpoints are on and saved in the background (checkpoint.async_mode = async).
bool saves_in_background(const TrainConfig& config);

// `kiln train`'s arguments, in order:
//   --config FILE|NAME, --print-config, --dry-run [--world-size N] [--json],
//   --override component=impl, --section.key=value | --section.key value | --bool.key
struct TrainCommandLine {
  std::string config;  // empty: the default recipe
  bool print_config = false;
  bool dry_run = false;  // plan the run, run nothing (dry_run.h)
  int world_size = 0;    // of the dry run; 0: the one the degrees imply
  bool json = false;     // the dry run as JSON
  // ("section.key", value) settings and ("--override", spec) in the order given.
  std::vector<std::pair<std::string, std::string>> settings;
};
TrainCommandLine parse_train_command_line(const std::vector<std::string>& args);

// The recipe named on the command line (or the default), the settings and
// overrides applied, then finalize().
TrainConfig load_train_config(const TrainCommandLine& command_line);

}  // namespace kiln::train
