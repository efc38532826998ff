// `kiln train` and `kiln generate` as a user runs them: a debug recipe on a
// small corpus the test writes shows a falling loss, writes metrics.jsonl,
// TensorBoard events and checkpoints, resumes (after SIGTERM and SIGKILL)
// with exactly the losses of an uninterrupted run, and `kiln generate`
// prints text from the checkpoint. Bad flags and missing files fail with
// one line naming the problem.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "kiln/base/error.h"
#include "kiln/io/safetensors.h"
#include "kiln/models/config.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/model_fields.h"
#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

class TrainE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    root_ = temp_->path();
    write_grammar_corpus((root_ / "corpus.txt").string());
  }
  static void TearDownTestSuite() { temp_.reset(); }

  // The flags of a small, fast run of the Llama debug recipe into `dump`.
  static std::string train_args(const fs::path& dump, int steps) {
    return "train --config llama3_debug --data.path " + (root_ / "corpus.txt").string() +
           " --data.text_split line --job.dump_folder " + dump.string() + " --training.steps " +
           std::to_string(steps) +
           " --training.seq_len 32 --training.local_batch_size 4 --metrics.log_freq 1"
           " --checkpoint.enable --checkpoint.interval 4 --lr_scheduler.warmup_steps 2";
  }

  static std::optional<TempDir> temp_;
  static fs::path root_;
};

std::optional<TempDir> TrainE2E::temp_;
fs::path TrainE2E::root_;

// Runs `kiln <args>` until metrics.jsonl in `dump` has a step >= `step`
// that this run logged (an earlier run may have got there: a signal before
// the run's handlers are set would end it as the default action does),
// then sends `sig`; returns the exit status (run_cli_until's).
int interrupt_run(const std::string& args, const fs::path& dump, const fs::path& log, int step,
                  int sig) {
  const int64_t before = last_logged_step(dump.string());
  return run_cli_until(
      args, log.string(),
      [&] {
        const int64_t now = last_logged_step(dump.string());
        return now >= step && now > before;
      },
      sig);
}

// Generated text without the "generating from ..." line (stderr).
std::string without_banner(const std::string& out) {
  size_t b = out.find("generating from");
  if (b == std::string::npos) return out;
  size_t e = out.find('\n', b);
  return out.substr(0, b) + (e == std::string::npos ? "" : out.substr(e + 1));
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_F(TrainE2E, TrainsCheckpointsAndGenerates) {
  fs::path dump = root_ / "run";
  const std::string args = train_args(dump, 20) +
                           " --validation.enable --validation.freq 10"
                           " --data.val_fraction 0.05 --validation.steps 2";
  CliRun r = run_cli(args);
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<nlohmann::json> m = read_metrics(dump);
  ASSERT_EQ(m.size(), 20u) << r.output;
  for (const char* k :
       {"step", "loss", "grad_norm", "lr", "tps", "tflops", "mfu", "mem_peak_bytes"})
    EXPECT_TRUE(m[0].contains(k)) << k;
  EXPECT_TRUE(m[9].contains("val_loss"));
  EXPECT_TRUE(m[19].contains("val_loss"));
  EXPECT_FALSE(m[10].contains("val_loss"));
  // The loss falls: from about ln(vocab) to well below it.
  double first = m[0]["loss"], last = (m[17]["loss"].get<double>() + m[18]["loss"].get<double>() +
                                       m[19]["loss"].get<double>()) /
                                      3;
  EXPECT_LT(last, first - 1.0) << r.output;
  EXPECT_LT(m[19]["val_loss"].get<double>(), m[9]["val_loss"].get<double>());
  EXPECT_NE(r.output.find("step 20  loss"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dump / "checkpoint" / "step-20" / "manifest.json"));
  EXPECT_TRUE(fs::exists(dump / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(dump / "config.toml"));
  EXPECT_FALSE(fs::is_empty(dump / "tb"));

  CliRun g = run_cli("generate --checkpoint " + dump.string() +
                     " --prompt 'the cat' --max-new-tokens 12 --temperature 0");
  ASSERT_EQ(g.status, 0) << g.output;
  EXPECT_NE(g.output.find("the cat"), std::string::npos) << g.output;
  EXPECT_GT(g.output.size(), std::string("the cat\n").size() + 10) << g.output;
  // Sampling from a step folder works too.
  g = run_cli(
      "generate --checkpoint " + (dump / "checkpoint" / "step-20").string() +
      " --prompt 'a dog' --max-new-tokens 8 --temperature 0.8 --top-k 20 --top-p 0.9 --seed 3");
  ASSERT_EQ(g.status, 0) << g.output;
  // Bad sampling flags fail before the model loads; a prompt longer than the
  // model's sequence length (32 here) fails before it is echoed.
  g = run_cli("generate --checkpoint " + dump.string() + " --prompt 'the cat' --top-p 2");
  EXPECT_NE(g.status, 0);
  EXPECT_NE(g.output.find("top-p must be in (0, 1], got 2"), std::string::npos) << g.output;
  EXPECT_EQ(g.output.find("generating from"), std::string::npos) << g.output;
  g = run_cli("generate --checkpoint " + dump.string() + " --prompt 'the cat' --temperature inf");
  EXPECT_NE(g.status, 0);
  EXPECT_NE(g.output.find("temperature must be finite and >= 0, got inf"), std::string::npos)
      << g.output;
  // An empty prompt is one: generation starts from the document-start token.
  g = run_cli("generate --checkpoint " + dump.string() +
              " --prompt '' --max-new-tokens 4 --temperature 0");
  EXPECT_EQ(g.status, 0) << g.output;
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "the cat ";
  g = run_cli("generate --checkpoint " + dump.string() + " --prompt '" + long_prompt + "'");
  EXPECT_NE(g.status, 0);
  EXPECT_NE(g.output.find("more than the model's sequence length of 32"), std::string::npos)
      << g.output;
  EXPECT_EQ(g.output.find(long_prompt), std::string::npos) << g.output;

  // The same command again: already done.
  r = run_cli(args);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing to do"), std::string::npos) << r.output;

  // --checkpoint.load_step goes back to step 16 (the recipe keeps the
  // latest 2) and retrains the same steps (the log keeps steps 1-16 and gets
  // 17-20 again), exporting the final model as a Hugging Face folder that
  // `kiln generate --hf` reads.
  r = run_cli(args + " --checkpoint.load_step 16 --checkpoint.last_save_in_hf");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step-16 (step 16)"), std::string::npos) << r.output;
  std::vector<nlohmann::json> again = read_metrics(dump);
  ASSERT_EQ(again.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(again[i]["loss"], m[i]["loss"]) << i;
  EXPECT_TRUE(fs::exists(dump / "hf" / "config.json"));
  CliRun from_ckpt = run_cli("generate --checkpoint " + dump.string() +
                             " --prompt 'the bird' --max-new-tokens 10 --temperature 0");
  CliRun from_hf = run_cli("generate --hf " + (dump / "hf").string() +
                           " --prompt 'the bird' --max-new-tokens 10 --temperature 0");
  ASSERT_EQ(from_hf.status, 0) << from_hf.output;
  EXPECT_EQ(without_banner(from_hf.output), without_banner(from_ckpt.output));
}

// A run that failed before its first checkpoint leaves a tokenizer.json;
// the next run in the folder learns a new one (its data may differ) and
// says so; a run resuming from checkpoints keeps theirs.
TEST_F(TrainE2E, AFailedRunsTokenizerIsNotReused) {
  fs::path dump = root_ / "failed";
  CliRun failed = run_cli(train_args(dump, 2) + " --training.seq_len 1000000");
  ASSERT_NE(failed.status, 0) << failed.output;
  ASSERT_TRUE(fs::exists(dump / "tokenizer.json")) << failed.output;
  CliRun next = run_cli(train_args(dump, 2));
  ASSERT_EQ(next.status, 0) << next.output;
  EXPECT_NE(next.output.find("tokenizer.json is from a run that left no checkpoint; learning a new "
                             "one in its place"),
            std::string::npos)
      << next.output;
  CliRun resumed = run_cli(train_args(dump, 3));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("tokens (the one the checkpoints were trained with)"),
            std::string::npos)
      << resumed.output;
  EXPECT_EQ(resumed.output.find("learning a"), std::string::npos) << resumed.output;
}

// A step whose loss or gradient norm is not finite ends the run with an
// error naming it, before any save: the checkpoints from before it stay the
// latest, and the step's metrics are logged.
TEST_F(TrainE2E, ADivergedRunStopsBeforeSavingIt) {
  fs::path dump = root_ / "diverged";
  CliRun r = run_cli(train_args(dump, 6) + " --checkpoint.interval 1 --optimizer.lr 1e30");
  EXPECT_EQ(r.status, 1) << r.output;
  const std::smatch m = [&] {
    std::smatch found;
    std::regex_search(r.output, found, std::regex("step ([0-9]+): the loss is \\S+ and the "
                                                  "gradient norm \\S+: training diverged"));
    return found;
  }();
  ASSERT_FALSE(m.empty()) << r.output;
  const int64_t diverged = std::stoll(m[1].str());
  EXPECT_GE(diverged, 2);  // the first step starts from finite weights
  const std::vector<int64_t> saved = train::CheckpointManager((dump / "checkpoint").string()).steps();
  ASSERT_FALSE(saved.empty()) << r.output;
  EXPECT_EQ(saved.back(), diverged - 1) << r.output;
  EXPECT_EQ(read_metrics(dump.string()).back()["step"], diverged);
}

// Fine-tuning from a Hugging Face folder trains the model its config.json
// describes (here: its Llama 3.1 rope scaling, which no recipe key sets, and
// a depth and vocabulary the recipe leaves unset), with its tokenizer; a
// recipe that contradicts the folder, or a folder without a tokenizer, is
// refused.
TEST_F(TrainE2E, FineTunesTheModelAHuggingFaceFolderDescribes) {
  CliRun tok = run_cli("tokenizer train --input " + (root_ / "corpus.txt").string() +
                       " --vocab-size 300 --output " + (root_ / "hf_tok.json").string());
  ASSERT_EQ(tok.status, 0) << tok.output;
  auto folder = [&](const std::string& name, int64_t original_max_positions) {
    ModelConfig mc = kiln::model_config("llama3_debug");
    mc.rope_scaling = Llama31Scaling{8, 1, 4, original_max_positions};
    fs::path dir = root_ / name;
    save_hf_model(*build_model(mc, DType::f32, 7), dir.string());
    fs::copy_file(root_ / "hf_tok.json", dir / "tokenizer.json");
    return dir;
  };
  const fs::path as_registry = folder("hf_a", 8192), rescaled = folder("hf_b", 16);
  auto losses = [&](const fs::path& hf, const std::string& name) {
    CliRun r = run_cli(train_args(root_ / name, 2) + " --checkpoint.enable=false" +
                       " --checkpoint.initial_load_path " + hf.string());
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("model: " + (hf / "config.json").string()), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("tokens (checkpoint.initial_load_path's)"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("learning a"), std::string::npos) << r.output;
    return read_losses(root_ / name);
  };
  // Same weights, other rope scaling: another model, other losses.
  std::vector<double> a = losses(as_registry, "ft_a"), b = losses(rescaled, "ft_b");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NE(a[0], b[0]);

  // The export keeps the folder's dtype (checkpoint.export_dtype = auto).
  const fs::path bf16 = root_ / "hf_bf16";
  save_hf_model(*build_model(kiln::model_config("llama3_debug"), DType::bf16, 7), bf16.string());
  fs::copy_file(root_ / "hf_tok.json", bf16 / "tokenizer.json");
  CliRun exported = run_cli(train_args(root_ / "ft_bf16", 1) + " --checkpoint.last_save_in_hf" +
                            " --checkpoint.initial_load_path " + bf16.string());
  ASSERT_EQ(exported.status, 0) << exported.output;
  SafetensorsFile weights((root_ / "ft_bf16" / "hf" / "model.safetensors").string());
  EXPECT_EQ(weights.get("model.norm.weight").dtype(), DType::bf16);

  // The checkpoint of a fine-tune records its architecture: it generates
  // the same text once the folder is gone.
  CliRun ft = run_cli(train_args(root_ / "ft_e", 2) + " --checkpoint.initial_load_path " +
                      rescaled.string());
  ASSERT_EQ(ft.status, 0) << ft.output;
  const std::string generate = "generate --checkpoint " + (root_ / "ft_e").string() +
                               " --prompt 'the cat' --max-new-tokens 12 --temperature 0";
  CliRun with_folder = run_cli(generate);
  ASSERT_EQ(with_folder.status, 0) << with_folder.output;
  fs::rename(rescaled, root_ / "hf_b_moved");
  CliRun without = run_cli(generate);
  EXPECT_EQ(without.status, 0) << without.output;
  EXPECT_EQ(without.output, with_folder.output);
  fs::rename(root_ / "hf_b_moved", rescaled);

  // What the recipe leaves unset is the folder's: another depth and
  // vocabulary than llama3_debug's, recorded whole, so that its checkpoint
  // generates without the folder.
  ModelConfig shallow = kiln::model_config("llama3_debug");
  shallow.n_layers = 1;
  shallow.vocab_size = 300;
  const fs::path shallow_dir = root_ / "hf_shallow";
  save_hf_model(*build_model(shallow, DType::f32, 7), shallow_dir.string());
  fs::copy_file(root_ / "hf_tok.json", shallow_dir / "tokenizer.json");
  ft = run_cli(train_args(root_ / "ft_s", 2) + " --checkpoint.initial_load_path " +
               shallow_dir.string());
  ASSERT_EQ(ft.status, 0) << ft.output;
  const std::string recorded = read(root_ / "ft_s" / "config.toml");
  EXPECT_NE(recorded.find("\nn_layers = 1\n"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("\nvocab_size = 300\n"), std::string::npos) << recorded;
  fs::remove_all(shallow_dir);
  CliRun g = run_cli("generate --checkpoint " + (root_ / "ft_s").string() +
                     " --prompt 'the cat' --max-new-tokens 4 --temperature 0");
  EXPECT_EQ(g.status, 0) << g.output;

  CliRun r = run_cli(train_args(root_ / "ft_c", 2) + " --model.dim 128" +
                     " --checkpoint.initial_load_path " + as_registry.string());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("config.json has dim = 64 but the recipe sets model.dim = 128"),
            std::string::npos)
      << r.output;
  fs::remove(rescaled / "tokenizer.json");
  r = run_cli(train_args(root_ / "ft_d", 2) + " --checkpoint.initial_load_path " + rescaled.string());
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("holds no tokenizer"), std::string::npos) << r.output;
}

TEST_F(TrainE2E, ResumesAfterSigtermSighupSigintAndSigkillWithIdenticalLosses) {
  const int steps = 16;
  fs::path whole = root_ / "whole", cut = root_ / "cut";
  CliRun r = run_cli(train_args(whole, steps));
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<double> want = read_losses(whole);
  ASSERT_EQ(want.size(), size_t(steps));

  // SIGTERM: the step finishes, a checkpoint is saved, exit status 128 + 15.
  int status = interrupt_run(train_args(cut, steps), cut, root_ / "term.log", 2, SIGTERM);
  std::string log = read(root_ / "term.log");
  if (status != 0) {  // (0: it finished before the signal arrived)
    EXPECT_EQ(status, 128 + SIGTERM) << log;
    EXPECT_NE(log.find("stopped by signal 15"), std::string::npos) << log;
  }
  // SIGHUP and SIGINT (Ctrl-C) save the same way.
  status = interrupt_run(train_args(cut, steps), cut, root_ / "hup.log", 5, SIGHUP);
  log = read(root_ / "hup.log");
  if (status != 0) {
    EXPECT_EQ(status, 128 + SIGHUP) << log;
    EXPECT_NE(log.find("stopped by signal 1"), std::string::npos) << log;
  }
  status = interrupt_run(train_args(cut, steps), cut, root_ / "int.log", 7, SIGINT);
  log = read(root_ / "int.log");
  if (status != 0) {
    EXPECT_EQ(status, 128 + SIGINT) << log;
    EXPECT_NE(log.find("stopped by signal 2"), std::string::npos) << log;
  }
  // SIGKILL part-way through the rest: only complete checkpoints survive.
  interrupt_run(train_args(cut, steps), cut, root_ / "kill.log", 10, SIGKILL);
  // A checkpoint whose manifest went missing is passed over, and the run says so.
  std::vector<int64_t> saved = train::CheckpointManager((cut / "checkpoint").string()).steps();
  ASSERT_GE(saved.size(), 2u);
  fs::remove(cut / "checkpoint" / train::CheckpointManager::step_dir_name(saved.back()) / "manifest.json");
  r = run_cli(train_args(cut, steps));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(cat("step-", saved.back(), " has no manifest.json (damaged), so it is "
                              "passed over; resuming from step ", saved[saved.size() - 2])),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(read_losses(cut), want);  // bit-identical, every step
  EXPECT_EQ(read(cut / "checkpoint" / "step-16" / "model.safetensors"),
            read(whole / "checkpoint" / "step-16" / "model.safetensors"));
}

// Kernels split work by output, never by thread, so the thread count changes
// no bit of the losses.
TEST_F(TrainE2E, LossesDoNotDependOnTheThreadCount) {
  std::vector<std::vector<double>> losses;
  for (int threads : {1, 3}) {
    fs::path dump = root_ / ("threads" + std::to_string(threads));
    CliRun r = run_cli(train_args(dump, 6) + " --compile.graph_trainer --checkpoint.enable false" +
                       " --runtime.num_threads " + std::to_string(threads));
    ASSERT_EQ(r.status, 0) << r.output;
    losses.push_back(read_losses(dump));
  }
  ASSERT_EQ(losses[0].size(), 6u);
  EXPECT_EQ(losses[0], losses[1]);
}

// The default recipe runs the graph trainer and, with no peak cached yet,
// measures one so the first run reports MFU; a second run reads the cache.
TEST_F(TrainE2E, DefaultRecipeRunsTheGraphTrainerWithMfu) {
  const fs::path cache = root_ / "empty_cache", dump = root_ / "default_recipe";
  auto run = [&](const std::string& name) {
    return run_cli("train --data.path " + (root_ / "corpus.txt").string() +
                       " --data.text_split line --training.steps 2 --validation.enable false"
                       " --checkpoint.enable false --metrics.log_freq 1 --job.dump_folder " +
                       (dump / name).string(),
                   "KILN_CACHE_DIR=" + cache.string());
  };
  CliRun first = run("first");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("\nexecution: graph trainer"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("op-by-op eager: --compile.graph_trainer=false"), std::string::npos)
      << first.output;
  EXPECT_NE(first.output.find("f32 GEMM peak on "), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("measured on first use"), std::string::npos) << first.output;
  EXPECT_EQ(first.output.find("mfu unknown"), std::string::npos) << first.output;
  EXPECT_TRUE(fs::exists(cache / "peak.json")) << first.output;
  std::vector<nlohmann::json> metrics = read_metrics((dump / "first").string());
  ASSERT_EQ(metrics.size(), 2u) << first.output;
  for (const nlohmann::json& j : metrics) EXPECT_TRUE(j["mfu"].is_number()) << j.dump();

  CliRun second = run("second");
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("measured quickly on first use (cached in " +
                               (cache / "peak.json").string()),
            std::string::npos)
      << second.output;
}

TEST_F(TrainE2E, PrintConfig) {
  CliRun r = run_cli("train --print-config --training.steps 7 --override attention=flash");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[training]\nsteps = 7\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("attention_impl = \"flash\""), std::string::npos) << r.output;
  // Each component's registered implementations, with their descriptions.
  for (const ModelField& f : model_fields()) {
    if (!f.registry) continue;
    for (const std::string& impl : f.registry->names())
      EXPECT_NE(r.output.find("#   " + impl + ": " + f.registry->description(impl) + "\n"),
                std::string::npos)
          << f.key << " " << impl << "\n" << r.output;
  }
}

TEST_F(TrainE2E, BadInputFailsWithOneLine) {
  struct Case {
    std::string args, expect;
  };
  const std::string data = " --data.path " + (root_ / "corpus.txt").string();
  for (const Case& c : std::vector<Case>{
           {"train --training.stepz=3", "did you mean 'training.steps'"},
           {"train --runtime.eager_mode=lazy", "strict, debug, defer_and_fuse"},
           {"train --training.steps=ten", "training.steps"},
           {"train --override attention=splash", "model.attention_impl"},
           {"train --config /no/such/recipe.toml", "/no/such/recipe.toml"},
           {"train --config llama3_debug --data.path /no/such/corpus --job.dump_folder " +
                (root_ / "bad").string(),
            "/no/such/corpus"},
           {"train --config llama3_debug --parallelism.pipeline_parallel_degree 2" + data,
            "parallelism.pipeline_parallel_degree"},
           {"generate --checkpoint /no/such/run --prompt hi", "/no/such/run"},
           {"train --config " + root_.string(), "is a folder; --config takes a recipe file"},
           {"train --config llama3_debug --data.path /dev/zero --job.dump_folder " +
                (root_ / "bad").string(),
            "data path '/dev/zero' is neither a file nor a folder"},
           {"train --config llama3_debug --training.local_batch_size 2000000000 --job.dump_folder " +
                (root_ / "bad").string() + data,
            "training.local_batch_size = 2000000000 x training.seq_len = "},
       }) {
    CliRun r = run_cli(c.args);
    EXPECT_NE(r.status, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("kiln: error: "), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
}

}  // namespace
}  // namespace kiln::test
