#include "kiln/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <thread>
#include <tuple>

#include "kiln/base/bytes.h"
#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/data/chat_data.h"
#include "kiln/data/dataset.h"
#include "kiln/data/loader.h"
#include "kiln/data/tokenizer.h"
#include "kiln/dist/device_group.h"
#include "kiln/dist/mesh.h"
#include "kiln/dist/spmd_handshake.h"
#include "kiln/dist/world.h"
#include "kiln/io/atomic_file.h"
#include "kiln/models/hf_config.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/transformer.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/mixed_precision.h"
#include "kiln/optim/schedule.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile_cache.h"
#include "kiln/runtime/compile_pool.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/spmd.h"
#include "kiln/runtime/threads.h"
#include "kiln/train/async_checkpoint.h"
#include "kiln/train/checkpoint.h"
#include "kiln/train/distributed_checkpoint.h"
#include "kiln/train/metrics.h"
#include "kiln/train/parallelize.h"
#include "kiln/train/peft_adapter.h"
#include "kiln/train/peak_measure.h"
#include "kiln/train/profiler.h"
#include "kiln/train/run_device.h"
#include "kiln/train/run_inputs.h"
#include "kiln/train/run_setup.h"
#include "kiln/train/saved_run.h"
#include "kiln/train/signals.h"
#include "kiln/train/step.h"
#include "kiln/train/tensor_parallel.h"
#include "kiln/train/evaluation.h"

namespace fs = std::filesystem;

namespace kiln::train {
namespace {

// compile.replay's outcome since `before`, one note at the end of the run.
std::string replay_summary(const ReplayTotals& before) {
  ReplayTotals t = replay_totals();
  t.recordings -= before.recordings;
  t.replays -= before.replays;
  t.plain -= before.plain;
  std::string s = cat("replay: ", t.recordings, " recording", t.recordings == 1 ? "" : "s", ", ",
                      t.replays, " replayed run", t.replays == 1 ? "" : "s", ", ", t.plain,
                      " run", t.plain == 1 ? "" : "s", " launch by launch (each program's first)");
  for (const auto& [program, why] : t.refused)
    if (!before.refused.count(program)) s += cat("; ", program, " is not recorded: ", why);
  return s;
}

using Clock = std::chrono::steady_clock;

// Checkpoint names of AdamW's state: "optim.m.<parameter>", "optim.v.<parameter>".
const std::string kOptimizerPrefix = "optim.";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Which rung of the execution ladder runs, and the flag for the other end
// of it.
std::string execution_text(const TrainConfig& c) {
  const std::string& mode = c.runtime.eager_mode;
  const char* scan = c.compile.scan_layers ? ", the layers as one scan" : "";
  const std::string around = cat(c.compile.replay ? ", recorded once and replayed" : "",
                                 mode == "strict" ? "" : ", eager mode " + mode + " around it");
  const char* faster = "); the whole step as one program: --compile.graph_trainer";
  if (c.compile.graph_trainer && c.compile.graph_split) {
    const int64_t n = c.compile.graph_split_layers;
    return cat("graph trainer, split (forward and backward as separate programs, ",
               n > 0 ? cat("one pair per ", n, n == 1 ? " layer" : " layers") : "one pair for all layers",
               around, "); one program: --compile.graph_split=false");
  }
  if (c.compile.graph_trainer)
    return cat("graph trainer (the whole step as one program", scan, around,
               "); op-by-op eager: --compile.graph_trainer=false");
  if (c.compile.enable)
    return cat("per-block compile (each block's forward and backward as one program", scan,
               around, faster);
  if (mode == "defer_and_fuse")
    return cat("defer_and_fuse eager (ops recorded and run as fused programs", scan, faster);
  return cat(mode, " eager (op by op", scan, faster);
}

// checkpoint.export_dtype; auto: the dtype of the initial_load_path
// folder's weights (config.json's dtype: bfloat16 stays bfloat16, any other
// is float32), float32 without a folder.
DType export_dtype(const TrainConfig& c) {
  const std::string& d = c.checkpoint.export_dtype;
  if (d != "auto") return d == "bfloat16" ? DType::bf16 : DType::f32;
  const std::string& initial = c.checkpoint.initial_load_path;
  if (initial.empty()) return DType::f32;
  const HfConfig folder = read_hf_config((fs::path(initial) / "config.json").string());
  return folder.dtype == DType::bf16 ? DType::bf16 : DType::f32;
}

// A config's timeout (positive and finite: finalize checks it), rounded up.
std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(int64_t(std::ceil(seconds * 1000)));
}

// The LoRA line of the run's header.
std::string lora_text(const TrainConfig& c, const RunSetup& s) {
  const int64_t trained = s.num_trained_parameters(), all = s.num_parameters();
  return cat("lora: rank ", c.lora.rank, ", alpha ", c.lora.alpha, " on ", c.lora.targets, ": ",
             trained, " trained parameters (", std::fixed, std::setprecision(2),
             100.0 * double(trained) / double(all), "% of ", all,
             "), the rest frozen; mfu counts the frozen weights' backward without their "
             "gradients\n");
}

// The run's device mesh, current while the run lasts (the collective
// kernels find their process groups in it). Under mpirun the world is the
// MPI job, and on GPUs the NCCL group over it (kiln/dist/device_group.h);
// otherwise this process alone.
class MeshScope {
 public:
  MeshScope(const TrainConfig& c, Device device)
      : previous_(dist::current_mesh()), device_(device) {
    std::shared_ptr<dist::ProcessGroup> world = dist::world();
    const std::chrono::milliseconds timeout = milliseconds(c.comm.timeout_seconds);
    world->set_timeout(timeout);
    if (world->size() > 1) {
      world = dist::device_group(world, device);
      world->set_timeout(timeout);
    }
    mesh_ = std::make_shared<dist::DeviceMesh>(world, mesh_degrees(c));
    dist::set_current_mesh(mesh_);
  }
  ~MeshScope() { dist::set_current_mesh(previous_); }
  MeshScope(const MeshScope&) = delete;
  MeshScope& operator=(const MeshScope&) = delete;

  const std::shared_ptr<dist::DeviceMesh>& mesh() const { return mesh_; }
  dist::ProcessGroup& world() const { return mesh_->world(); }
  bool lead() const { return world().rank() == 0; }  // prints and writes the run's files
  Device device() const { return device_; }  // this rank's (run_device.h)

 private:
  std::shared_ptr<dist::DeviceMesh> previous_, mesh_;
  Device device_;
};

// A step whose loss or gradient norm is not finite has updated the weights
// with it: training stops before a save puts them in place of a good
// checkpoint. A step with nothing to learn (chat data whose batch holds no
// assistant token) has the loss 0/0 and no gradient, and goes on.
bool diverged(const StepResult& r) {
  const bool nothing_to_learn = r.targets && *r.targets == 0;
  return !std::isfinite(r.grad_norm) || (!std::isfinite(r.loss) && !nothing_to_learn);
}

constexpr int kStopByCallback = -1;  // agree_on_stop's answer for a callback's stop

class Run {
 public:
  // `out` is rank 0's; the other ranks print nothing.
  Run(const TrainConfig& c, const MeshScope& mesh, std::ostream& out, const StepCallback& on_step)
      : c_(c), mesh_(mesh), out_(mesh.lead() ? out : null_out_), on_step_(on_step),
        device_(mesh.device()), s_(c, mesh.mesh(), device_) {}
  TrainResult go();

 private:
  // Every rank's reason to stop after this step: a signal number,
  // kStopByCallback, or 0.
  int agree_on_stop(int sig, bool callback_stop) const;
  void setup_data();
  void setup_model();
  bool resume();
  StepResult train_step(double lr);
  double validate();
  CheckpointData checkpoint_data(int64_t step) const;
  void save(int64_t step, TrainResult& result, std::optional<MetricsLogger>& metrics);
  void report(const std::optional<AsyncCheckpointer::Saved>& saved, TrainResult& result,
              std::optional<MetricsLogger>& metrics);
  std::vector<Tensor> checkpoint_shards(const std::vector<Tensor>& local) const;
  void export_hf_model();

  const TrainConfig& c_;
  const MeshScope& mesh_;
  std::ostream null_out_{nullptr};  // discards (badbit, no buffer)
  std::ostream& out_;
  const StepCallback& on_step_;
  const Device device_;  // where this rank computes
  DataSource src_;
  RunTokenizer tok_;
  std::unique_ptr<data::DataLoader> loader_, val_loader_;
  RunSetup s_;  // the model, its shards, AdamW and the step
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  bool memory_reported_ = false;
  const dist::Handshake handshake_ = dist::handshake_mode();
  // The ranks are known to run the same step: the user says so, or the
  // handshake checks it. Then its collectives stay inside its programs.
  bool spmd_safe_step() const { return c_.compile.spmd_safe || handshake_ != dist::Handshake::off; }
  bool handshaken_ = false;
  int64_t start_step_ = 0;
  // The saves' and the resume's own group (checkpoint.timeout_seconds), and
  // with checkpoint.async_mode = "async" the saves' thread (last: destroyed
  // first, it waits for the save in flight).
  std::shared_ptr<dist::ProcessGroup> checkpoint_group_;
  AsyncCheckpointer saving_;
};

// Every rank's reason to stop, agreed on: a rank stopping alone would leave
// the others waiting in the next step's collectives. Encoded so that the
// maximum over ranks is a signal if any rank has one (it decides the exit
// status): signal + 1, 1 for the callback, 0 for none.
int Run::agree_on_stop(int sig, bool callback_stop) const {
  int32_t mine = sig ? sig + 1 : callback_stop ? 1 : 0, any = mine;
  if (mesh_.world().size() > 1)
    mesh_.world().all_reduce(&mine, &any, 1, DType::i32, dist::ReduceOp::max).wait();
  return any > 1 ? any - 1 : any == 1 ? kStopByCallback : 0;
}

void Run::setup_data() {
  // The loader builds a microbatch as four int64 tensors (ids, targets,
  // document ids, positions) from host vectors of the same size: refuse one
  // that cannot fit before making it (it was a bare std::bad_alloc).
  const double tokens = double(c_.training.local_batch_size) * double(c_.training.seq_len);
  const double ram = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  KILN_CHECK(64 * tokens <= ram, "training.local_batch_size = ", c_.training.local_batch_size,
             " x training.seq_len = ", c_.training.seq_len, " makes microbatches of ", int64_t(std::min(tokens, 9e18)),
             " tokens, whose ids, targets, document ids and positions alone take ",
             bytes_text(int64_t(std::min(64 * tokens, 9e18))), ", more than this machine's ",
             bytes_text(int64_t(ram)), " of memory");
  src_ = data_source(c_);
  // Rank 0 learns the tokenizer (when there is none yet) and writes it; the
  // other ranks then load that file.
  if (mesh_.lead()) tok_ = run_tokenizer(c_, s_.mc, src_, true, out_);
  // A fine-tune's tokenizer is its folder's: a copy in the dump folder
  // keeps the checkpoints usable once that folder is gone (saved_run.h).
  if (mesh_.lead() && !c_.checkpoint.initial_load_path.empty())
    copy_tokenizer_files(tok_.path, c_.job.dump_folder);
  mesh_.world().barrier().wait();
  if (!mesh_.lead()) tok_ = run_tokenizer(c_, s_.mc, src_, false, out_);
  const Tokenizer& tok = *tok_.tokenizer;
  KILN_CHECK(tok.vocab_size() <= s_.mc.vocab_size, "the tokenizer ", tok_.path, " has ",
             tok.vocab_size(), " ids but model.vocab_size is ", s_.mc.vocab_size,
             ": set --model.vocab_size=", tok.vocab_size(), " or larger");
  auto t0 = Clock::now();
  const bool chat = c_.data.format == "chat";
  data::Dataset ds;
  if (chat) {
    data::ChatDataOptions co{data::parse_train_on(c_.data.train_on), c_.training.seq_len + 1};
    ds = data::split_dataset(data::read_chat_corpus(data::list_source_files(src_.paths),
                                                    data::tokenizer_chat_template(tok_.path), tok,
                                                    co),
                             c_.data.val_fraction);
  } else {
    data::DatasetSpec spec;
    spec.paths = src_.paths;
    spec.source = src_.source;
    spec.val_fraction = c_.data.val_fraction;
    spec.threads = int(c_.runtime.num_threads);
    ds = data::load_dataset(spec, &tok);
  }
  KILN_CHECK(ds.train.max_token() < s_.mc.vocab_size, "the training data holds token id ",
             ds.train.max_token(), ", outside model.vocab_size = ", s_.mc.vocab_size);
  out_ << "data: " << src_.description << ": " << ds.train.num_documents() << " documents, "
       << ds.train.num_tokens() << " tokens for training, " << ds.val.num_tokens() << " held out ("
       << std::fixed << std::setprecision(1) << seconds_since(t0) << " s)" << std::endl;
  out_.unsetf(std::ios::floatfield);

  data::LoaderOptions lo;
  lo.packing.seq_len = c_.training.seq_len;
  if (c_.data.add_bos && !chat) lo.packing.bos_id = bos_token_id(tok);
  if (c_.data.add_eos && !chat) lo.packing.eos_id = eos_token_id(tok);
  lo.packing.whole_documents = chat;
  lo.local_batch_size = c_.training.local_batch_size;
  lo.grad_accum_steps = s_.accum;
  lo.dp_rank = mesh_.mesh()->coordinate("dp");
  lo.dp_world = mesh_.mesh()->size("dp");
  lo.shuffle = c_.data.shuffle;
  lo.seed = uint64_t(c_.training.seed);
  loader_ = std::make_unique<data::DataLoader>(
      std::make_shared<const data::TokenCorpus>(std::move(ds.train)), lo);
  if (c_.validation.enable) {
    lo.grad_accum_steps = 1;
    lo.shuffle = false;
    try {
      val_loader_ = std::make_unique<data::DataLoader>(
          std::make_shared<const data::TokenCorpus>(std::move(ds.val)), lo);
    } catch (const Error& e) {
      fail("validation: the held-out split (data.val_fraction = ", c_.data.val_fraction,
           ") cannot be used: ", e.what(),
           "; raise --data.val_fraction or set --validation.enable=false");
    }
  }
}

void Run::setup_model() {
  s_.build();
  optim::ScheduleOptions so;
  so.lr = c_.optimizer.lr;
  so.warmup_steps = c_.lr_scheduler.warmup_steps;
  so.decay_ratio = c_.lr_scheduler.decay_ratio;
  so.decay_type = optim::parse_decay_type(c_.lr_scheduler.decay_type);
  so.min_lr_factor = c_.lr_scheduler.min_lr_factor;
  schedule_ = std::make_unique<optim::LRSchedule>(so, c_.training.steps);
}

bool Run::resume() {
  if (!checkpoint_group_) return false;  // neither checkpoints nor a step to load
  const std::optional<int64_t> step =
      agree_on_resume_step(*checkpoint_group_, resume_step(c_, *checkpoints_), checkpoints_->folder());
  if (c_.checkpoint.enable && c_.checkpoint.load_step < 0)
    for (int64_t s : checkpoints_->steps_without_manifest())
      if (!step || s > *step)
        out_ << "note: " << checkpoints_->folder() << "/" << CheckpointManager::step_dir_name(s)
             << " has no manifest.json (damaged), so it is passed over; "
             << (step ? cat("resuming from step ", *step) : std::string("starting afresh"))
             << std::endl;
  if (!step) return false;
  // Every rank waits here, under the checkpoint's timeout, until all have
  // read it: the training's collectives would give a slow reader less time.
  LoadedCheckpoint ck = load_checkpoint_together(*checkpoints_, *step, *checkpoint_group_);
  // Checkpoints hold full tensors: any mesh resumes from any other.
  std::vector<Tensor> full;
  for (size_t i = 0; i < s_.names.size(); ++i) {
    auto it = ck.model.find(s_.names[i]);
    KILN_CHECK(it != ck.model.end(), "checkpoint ", ck.path, " has no parameter '", s_.names[i],
               "': it was written for another model; use another --job.dump_folder");
    KILN_CHECK(it->second.shape() == s_.shapes[i], "checkpoint ", ck.path, ": parameter '",
               s_.names[i], "' is ", it->second.shape(), " but the model's is ", s_.shapes[i],
               ": it was written for another model; use another --job.dump_folder");
    const Tensor& t = it->second;
    full.push_back((t.dtype() == s_.masters[i].dtype() ? t : t.to(s_.masters[i].dtype())).to(device_));
  }
  KILN_CHECK(ck.optimizer_state.contains("step"), "checkpoint ", ck.path, " cannot be resumed: "
             "its manifest has no optimizer \"step\" (a training run saves one)");
  s_.state = optim::adamw_state_from_tensors(
      ck.optimizer, ck.optimizer_state["step"].get<int64_t>(), s_.names, full, kOptimizerPrefix);
  s_.masters = s_.dist->from_full(full);
  s_.state.m = s_.dist->from_full(s_.state.m);
  s_.state.v = s_.dist->from_full(s_.state.v);
  loader_->load_json(ck.loader);
  if (ck.scheduler != schedule_->to_json())
    out_ << "note: the learning-rate schedule differs from the checkpoint's; continuing with "
            "this run's"
         << std::endl;
  start_step_ = ck.step;
  out_ << "resumed from " << ck.path << " (step " << ck.step << ")" << std::endl;
  return true;
}

StepResult Run::train_step(double lr) {
  std::vector<data::Batch> batches;
  {
    profile::Span span("data", "next batch");
    for (int64_t a = 0; a < s_.accum; ++a) batches.push_back(loader_->next().to(device_));
  }
  if (!memory_reported_ && mesh_.lead()) {
    MemoryEstimate e;
    {
      SpmdSafeGuard spmd(spmd_safe_step());  // as the step runs: it counts the programs run
      e = s_.expected_memory(batches);
    }
    out_ << "expected peak memory: " << bytes_text(e.total()) << " (" << bytes_text(e.inputs())
         << " parameters, optimizer state and batch + " << bytes_text(e.computed)
         << " computed in the step";
    if (e.recordings > 0)
      out_ << " + " << bytes_text(e.recordings)
           << " kept by the programs' recordings (compile.replay)";
    out_ << "; activation_checkpoint.mode = " << c_.activation_checkpoint.mode << ")";
    if (e.offloaded > 0) out_ << ", and " << bytes_text(e.offloaded) << " of offloaded activations in host memory";
    if (saves_in_background(c_))
      out_ << ", and " << bytes_text(s_.checkpoint_shard_bytes())
           << " of host memory for the background checkpoint copy";
    out_ << std::endl;
    memory_reported_ = true;
  }
  // KILN_SPMD_HANDSHAKE: the ranks agree on the step's graph before its
  // first run (compile) or every run (dispatch).
  if (handshake_ == dist::Handshake::dispatch ||
      (handshake_ == dist::Handshake::compile && !handshaken_)) {
    dist::spmd_handshake(mesh_.world(), s_.step->graph(s_.masters, s_.state, batches),
                         "the training step");
    handshaken_ = true;
  }
  std::optional<int64_t> targets;  // chat data: the step's assistant tokens, every rank's
  if (c_.data.format == "chat") {
    int64_t n = 0;
    for (const data::Batch& b : batches)
      for (int64_t t : b.targets.to_vector<int64_t>()) n += t != -100;
    targets = s_.dist->sum_over_dp(scalar(double(n), DType::i64, device_)).item<int64_t>();
  }
  SpmdSafeGuard spmd(spmd_safe_step());
  StepResult r = s_.step->run(s_.masters, s_.state, batches, lr);
  r.targets = targets;
  return r;
}

double Run::validate() {
  nn::ParameterScope scope(*s_.model, s_.compute_params());
  ValidationPass pass;
  pass.steps = c_.validation.steps;
  pass.local_batch_size = c_.training.local_batch_size;
  pass.dp_rank = mesh_.mesh()->coordinate("dp");
  pass.dp_degree = s_.dist->dp_degree();
  pass.document_mask = c_.data.document_mask;
  pass.device = device_;
  pass.sum_over_dp = [this](const Tensor& t) { return s_.dist->sum_over_dp(t); };
  return validation_loss(*s_.model, *val_loader_, pass);
}

// What a checkpoint holds of this rank's tensors: its dp_shard shards of the
// full tensors. Under tensor or expert parallelism the tp slices and the
// experts are gathered first (collective), so checkpoints never depend on
// the tp or ep degree.
std::vector<Tensor> Run::checkpoint_shards(const std::vector<Tensor>& local) const {
  if (!s_.tp.enabled() && !s_.ep.split()) return local;
  return ParamDistribution(mesh_.mesh(), s_.shapes).from_full(s_.dist->to_full(local));
}

// What this rank saves of the step (collective under tensor or expert
// parallelism): the first replica's dp_shard ranks each write their shards
// (rank 0 alone without SimpleFSDP).
CheckpointData Run::checkpoint_data(int64_t step) const {
  CheckpointData d;
  d.step = step;
  std::vector<Tensor> masters = checkpoint_shards(s_.masters);
  for (size_t i = 0; i < s_.names.size(); ++i) d.model.emplace_back(s_.names[i], masters[i]);
  optim::AdamWState state{s_.state.step, checkpoint_shards(s_.state.m),
                          checkpoint_shards(s_.state.v)};
  d.optimizer = optim::adamw_state_tensors(state, s_.names, kOptimizerPrefix);
  d.optimizer_state = optim::adamw_state_json(s_.state, s_.adamw->options());
  d.scheduler = schedule_->to_json();
  d.loader = loader_->to_json();
  d.rng = rng_to_json(Generator(uint64_t(c_.training.seed)));
  d.config = {{"recipe", to_toml(c_)}, {"tokenizer", tok_.path}};
  // A fine-tune's architecture came from its folder's config.json: recorded,
  // so the checkpoint stands without the folder (or with it changed).
  if (!c_.checkpoint.initial_load_path.empty())
    d.config["model"] = nlohmann::json::parse(hf_config_json(s_.mc));
  d.shard_index = mesh_.mesh()->coordinate("dp_shard");
  d.shard_count = mesh_.mesh()->size("dp_shard");
  const std::string m = kOptimizerPrefix + "m.", v = kOptimizerPrefix + "v.";
  for (size_t i = 0; i < s_.names.size(); ++i)
    for (const std::string& prefix : {std::string(), m, v})
      d.full_rows[prefix + s_.names[i]] = s_.shapes[i][0];
  return d;
}

// Saves the step (every rank takes part): at once, or with
// checkpoint.async_mode = "async" its copy in host memory on a thread.
void Run::save(int64_t step, TrainResult& result, std::optional<MetricsLogger>& metrics) {
  profile::Span span("checkpoint", "save");
  if (!saves_in_background(c_)) {
    result.last_checkpoint = save_checkpoint(*checkpoints_, checkpoint_data(step), *mesh_.mesh(),
                                             *checkpoint_group_);
    if (metrics) metrics->note("saved checkpoint " + result.last_checkpoint);
    return;
  }
  CheckpointData d = checkpoint_data(step);
  if (!writes_checkpoint_shards(*mesh_.mesh())) d.model.clear(), d.optimizer.clear();  // no copy
  const bool first = !saving_.copy_bytes();
  report(saving_.start(d, [this](const CheckpointData& copy) {
    profile::Span written("checkpoint", "write");
    return save_checkpoint(*checkpoints_, copy, *mesh_.mesh(), *checkpoint_group_);
  }), result, metrics);
  if (first && metrics)
    metrics->note(cat("saving checkpoints in the background from a copy in host memory (",
                      bytes_text(double(saving_.copy_bytes())), " on this rank, kept for the run)"));
}

// A save finished in the background (rethrowing its error).
void Run::report(const std::optional<AsyncCheckpointer::Saved>& saved, TrainResult& result,
                 std::optional<MetricsLogger>& metrics) {
  if (!saved) return;
  result.last_checkpoint = saved->path;
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", saved->seconds);
  if (metrics)
    metrics->note(cat("saved checkpoint ", saved->path, " (in the background, ", took, ")"));
}

void Run::export_hf_model() {
  const DType dtype = export_dtype(c_);
  std::vector<Tensor> full = s_.dist->to_full(s_.masters);
  if (!mesh_.lead()) {
    synchronize(device_);  // run this rank's part of the gathers before it exits
    return;
  }
  nn::StateDict sd;
  for (size_t i = 0; i < s_.names.size(); ++i) sd[s_.names[i]] = full[i].to(kCPU);
  std::string dir = (fs::path(c_.job.dump_folder) / "hf").string();
  const std::string& initial = c_.checkpoint.initial_load_path;
  if (s_.frozen) {  // LoRA: the adapters, as peft saves them
    save_peft_adapter(run_adapter(c_, std::move(sd)), dir, dtype, tok_.path);
    out_ << "exported the LoRA adapters as a PEFT folder: " << dir
         << " (kiln convert --merge-lora makes a merged model of a checkpoint)" << std::endl;
    return;
  }
  CausalLM m(s_.mc, dtype);
  m.load_state_dict(sd);
  // A fine-tune ends where the model it started from ends.
  export_hf(m, tok_.path, dir,
            initial.empty() ? std::vector<int32_t>{} : hf_folder_eos_ids(initial));
  out_ << "exported the model as a Hugging Face folder (" << dtype_name(dtype) << "): " << dir
       << std::endl;
}

TrainResult Run::go() {
  if (c_.runtime.num_threads > 0)
    set_num_threads(int(c_.runtime.num_threads));
  else if (!std::getenv("KILN_NUM_THREADS"))  // the ranks of a host share its cores
    set_num_threads(std::max(1, int(std::thread::hardware_concurrency()) / dist::local_ranks()));
  EagerModeGuard mode(parse_eager_mode(c_.runtime.eager_mode));
  const int64_t dp = mesh_.mesh()->size("dp");

  std::error_code ec;
  fs::create_directories(c_.job.dump_folder, ec);
  KILN_CHECK(!ec, "job.dump_folder '", c_.job.dump_folder, "': cannot create it: ", ec.message());
  if (mesh_.lead())
    write_file_atomic((fs::path(c_.job.dump_folder) / "config.toml").string(), to_toml(c_));
  setup_data();
  setup_model();
  checkpoints_ = std::make_unique<CheckpointManager>(
      checkpoint_folder(c_),
      int(c_.checkpoint.keep_latest_k));
  if (c_.checkpoint.enable || c_.checkpoint.load_step >= 0)
    checkpoint_group_ = checkpoint_group(mesh_.world(), milliseconds(c_.checkpoint.timeout_seconds));
  resume();

  const int64_t steps = c_.training.steps;
  // Per rank (tps and MFU are per device, as in TorchTitan).
  const int64_t tokens_per_step = c_.training.local_batch_size * s_.accum * c_.training.seq_len;
  const double flops_per_tok = s_.flops_per_token();
  // Only rank 0 reports MFU, so only it finds (or measures) the peak; the
  // other ranks wait for it rather than compete for the host's cores.
  std::optional<DevicePeak> peak;
  if (mesh_.lead()) peak = run_peak(device_, s_.policy.param_dtype, num_threads());
  mesh_.world().barrier().wait();
  out_ << "model: " << s_.mc.name << " (" << s_.mc.family << "), " << param_count(s_.mc)
       << " parameters, " << s_.model->named_parameters().size() << " tensors; "
       << dtype_name(s_.policy.param_dtype)
       << " compute, f32 master weights\n"
       << (s_.frozen ? lora_text(c_, s_) : std::string())
       << "device: " << backend(device_).describe(device_.index) << "\n"
       << backend(device_).describe_matmul(s_.policy.param_dtype) << "\n"
       << "training: " << steps << " steps of " << tokens_per_step * dp << " tokens ("
       << c_.training.local_batch_size << (dp > 1 ? cat(" x ", dp, " dp ranks") : "") << " x "
       << s_.accum << " microbatches x " << c_.training.seq_len << "), " << num_threads()
       << " threads\n"
       << "execution: " << execution_text(c_) << "\n";
  if (mesh_.world().size() > 1) {
    // Where collectives run, when the step runs as programs at all.
    const bool programs = c_.compile.graph_trainer || c_.compile.enable ||
                          c_.runtime.eager_mode == "defer_and_fuse";
    const char* collectives =
        !programs          ? ""
        : !spmd_safe_step() ? "; collectives skinny (each a program of its own; "
                              "--compile.spmd_safe keeps them in the step's programs)"
        : c_.compile.overlap_collectives ? "; collectives in the step's programs, overlapped"
                                         : "; collectives in the step's programs";
    out_ << "parallelism: " << mesh_.world().size() << " ranks, " << s_.dist->describe()
         << collectives << "; tps and mfu per rank\n";
  }
  out_ << "mfu: "
       << (peak ? "against the " + peak->source : "unknown (no peak known for this device)")
       << "\n"
       << "outputs: " << c_.job.dump_folder << std::endl;

  TrainResult result;
  result.start_step = result.last_step = start_step_;
  if (start_step_ >= steps) {
    out_ << "already trained to step " << start_step_ << " (training.steps = " << steps
         << "): nothing to do" << std::endl;
    return result;
  }

  MetricsOptions mo;
  mo.dump_folder = c_.job.dump_folder;
  mo.total_steps = steps;
  mo.log_freq = c_.metrics.log_freq;
  mo.enable_tensorboard = c_.metrics.enable_tensorboard;
  mo.tb_folder = c_.metrics.save_tb_folder;
  mo.progress_bar = c_.metrics.progress_bar;
  std::optional<MetricsLogger> metrics;  // rank 0's
  const ReplayTotals replays_before = replay_totals();
  if (mesh_.lead()) metrics.emplace(mo, start_step_, out_);
  StopSignals signals;

  reset_peak_memory(device_);
  double window_seconds = 0;
  int64_t window_tokens = 0;
  StepProfiler profiler(c_, mesh_.world().rank(), mesh_.world().size(), device_);
  for (int64_t step = start_step_ + 1; step <= steps; ++step) {
    profiler.begin_step(step);
    std::optional<profile::Span> step_span;
    if (profile::active()) step_span.emplace("step", cat("step ", step));
    auto t0 = Clock::now();
    StepMetrics m;
    m.step = step;
    m.lr = schedule_->lr(step - 1);
    StepResult r = train_step(m.lr);
    s_.router_bias->update(s_.masters, r.expert_tokens, *s_.dist);
    m.loss = r.loss;
    m.grad_norm = r.grad_norm;
    m.targets = r.targets;
    if (!r.expert_tokens.empty()) m.moe = expert_load(r.expert_tokens, r.dropped_tokens);
    window_seconds += seconds_since(t0);
    window_tokens += tokens_per_step;
    result.last_step = step;
    result.last_loss = m.loss;
    result.last_grad_norm = m.grad_norm;

    bool validating = val_loader_ && (step % c_.validation.freq == 0 || step == steps);
    if (validating) {
      m.val_loss = validate();
      m.val_ppl = std::exp(*m.val_loss);
    }
    if (metrics && (validating || diverged(r) || metrics->should_log(step))) {
      m.tps = double(window_tokens) / window_seconds;
      m.tflops = flops_per_tok * m.tps / 1e12;
      if (peak) m.mfu = flops_per_tok * m.tps / peak->flops;
      m.mem_peak_bytes = memory_stats(device_).peak_allocated;
      reset_peak_memory(device_);
      if (c_.activation_checkpoint.mode == "offload") {
        m.mem_offload_peak_bytes = memory_stats(device_, Pool::offload).peak_allocated;
        reset_peak_memory(device_, Pool::offload);
      }
      window_seconds = 0, window_tokens = 0;
      metrics->log(m);
    }
    KILN_CHECK(!diverged(r), "step ", step, ": the loss is ", r.loss, " and the gradient norm ",
               r.grad_norm, ": training diverged, and nothing from this step on is saved (a "
               "resumed run starts from the latest checkpoint); a lower --optimizer.lr or more "
               "--lr_scheduler.warmup_steps may keep it finite");
    bool callback_stop = on_step_ && !on_step_(m);
    int stop = agree_on_stop(signals.received(), callback_stop);
    int sig = stop == kStopByCallback ? 0 : stop;
    if (c_.checkpoint.enable && (checkpoint_due(step, steps, c_.checkpoint.interval) || stop))
      save(step, result, metrics);
    if (stop || saving_.finished()) report(saving_.wait(), result, metrics);
    step_span.reset();
    if (std::string trace = profiler.end_step(step); !trace.empty() && metrics)
      metrics->note("wrote profile trace " + trace + " (kiln profile summarize reads it)");
    if (metrics) metrics->progress(step);
    if (stop == kStopByCallback) {
      result.stopped_by_callback = true;
      if (metrics)
        metrics->note(cat("stopped by the step callback after step ", step,
                          c_.checkpoint.enable ? "; the checkpoint above resumes it" : ""));
      return result;
    }
    if (sig) {
      result.stopped_by_signal = sig;
      if (metrics)
        metrics->note(cat("stopped by signal ", sig, " after step ", step,
                          c_.checkpoint.enable ? "; the checkpoint above resumes it"
                                               : " (checkpointing is disabled: nothing saved)"));
      return result;
    }
  }
  report(saving_.wait(), result, metrics);
  if (c_.compile.replay && metrics) metrics->note(replay_summary(replays_before));
  if (c_.checkpoint.last_save_in_hf) export_hf_model();
  // Kernel builds still running would be lost at exit; finished, they are
  // in the disk cache for the next run.
  CompileCache& cache = CompileCache::instance();
  if (int n = pending_compile_jobs(); n && !(cache.l2_dir().empty() && cache.l3_dir().empty())) {
    out_ << "finishing " << n << " background kernel build" << (n == 1 ? "" : "s")
         << " for the compile cache" << std::endl;
    wait_for_compile_jobs();
  }
  cache.record_run_stats();  // what `kiln cache stats` reports
  return result;
}

}  // namespace

void check_supported(const TrainConfig& c) {
  const ParallelismSection& p = c.parallelism;
  for (auto [key, what, degree] :
       {std::tuple{"context_parallel_degree", "context parallelism", p.context_parallel_degree},
        {"pipeline_parallel_degree", "pipeline parallelism", p.pipeline_parallel_degree}})
    KILN_CHECK(degree <= 1, "parallelism.", key, " = ", degree, " asks for ", what,
               ", which is not implemented yet: this trainer runs data, tensor and expert "
               "parallelism (data_parallel_replicate_degree, data_parallel_shard_degree,"
               " tensor_parallel_degree, expert_parallel_degree); set it to 1");
}

dist::MeshDegrees mesh_degrees(const TrainConfig& c) {
  dist::MeshDegrees d;
  d.data_parallel_replicate_degree = c.parallelism.data_parallel_replicate_degree;
  d.data_parallel_shard_degree = c.parallelism.data_parallel_shard_degree;
  d.tensor_parallel_degree = c.parallelism.tensor_parallel_degree;
  d.expert_parallel_degree = c.parallelism.expert_parallel_degree;
  return d;
}

std::string dump_tokenizer_path(const TrainConfig& config) {
  return (fs::path(config.job.dump_folder) / "tokenizer.json").string();
}

TrainResult run_training(const TrainConfig& config, std::ostream& out, const StepCallback& on_step) {
  std::optional<MeshScope> mesh;
  try {
    check_supported(config);
    mesh.emplace(config, run_device(config.training.device, dist::local_rank(), dist::local_ranks()));
    return Run(config, *mesh, out, on_step).go();
  } catch (const Error& e) {
    // Every rank's error reaches the terminal (mpirun forwards stderr): say whose.
    if (dist::launched_by_mpirun() && dist::world()->size() > 1)
      fail("rank ", dist::world()->rank(), ": ", e.what());
    throw;
  }
}

}  // namespace kiln::train
