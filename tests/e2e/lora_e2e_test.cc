// LoRA as a user runs it: `kiln train --lora.rank 4` trains the adapters
// alone, and every rung of the execution ladder (strict, defer_and_fuse,
// per-block compile, the graph trainer whole and split, the layers as a
// scan) gives the same losses and gradient norms bit for bit, for a dense
// model and an MoE one; the adapters start as the identity, so the first
// loss is the base model's; a checkpoint holds the adapters and their AdamW
// moments only, and resuming from it continues with the uninterrupted
// run's losses, and `kiln convert` makes it a PEFT folder; a bad [lora]
// setting is an error naming its key.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kiln/models/lora.h"
#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

const std::string kLora = " --lora.rank 4 --lora.alpha 8 ";
const std::string kAllTargets = " --lora.targets q,k,v,o,gate,up,down ";

class LoraE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    corpus_ = fs::path(temp_->path()) / "corpus.txt";
    write_grammar_corpus(corpus_.string());
  }
  static void TearDownTestSuite() { temp_.reset(); }

  // `steps` steps of `recipe` into <temp>/<name> with `flags`.
  static CliRun train(const std::string& name, const std::string& recipe, int steps,
                      const std::string& flags) {
    return run_cli(debug_train_args(corpus_.string(), dump(name), steps,
                                    "--config " + recipe + " --training.local_batch_size 4 " +
                                        "--optimizer.lr 0.01 " + flags));
  }
  static std::string dump(const std::string& name) { return *temp_ / name; }

  static std::optional<TempDir> temp_;
  static fs::path corpus_;
};

std::optional<TempDir> LoraE2E::temp_;
fs::path LoraE2E::corpus_;

struct Rung {
  std::string name, flags;
};

const std::vector<Rung> kRungs = {
    {"strict", "--runtime.eager_mode strict --compile.enable=false --compile.graph_trainer=false"},
    {"defer_and_fuse",
     "--runtime.eager_mode defer_and_fuse --compile.enable=false --compile.graph_trainer=false"},
    {"per_block_compile", "--compile.enable --compile.graph_trainer=false"},
    {"graph_trainer", "--compile.graph_trainer"},
    {"graph_split_layers",
     "--compile.graph_trainer --compile.graph_split --compile.graph_split_layers 1"},
    {"scan_strict", "--compile.enable=false --compile.graph_trainer=false --compile.scan_layers"},
    {"scan_graph_trainer", "--compile.graph_trainer --compile.scan_layers"},
};

TEST_F(LoraE2E, EveryRungTrainsTheAdaptersToTheSameBits) {
  for (const auto& [recipe, targets] : {std::pair{"llama3_debug", kAllTargets},
                                        std::pair{"qwen3_moe_debug", std::string(" ")}}) {
    SCOPED_TRACE(recipe);
    std::vector<double> losses, norms;
    for (const Rung& rung : kRungs) {
      const std::string name = std::string(recipe) + "_" + rung.name;
      CliRun r = train(name, recipe, 8, kLora + targets + rung.flags);
      ASSERT_EQ(r.status, 0) << name << "\n" << r.output;
      EXPECT_NE(r.output.find("\nlora: rank 4, alpha 8 on "), std::string::npos) << r.output;
      std::vector<double> l, n;
      for (const auto& j : read_metrics(dump(name))) {
        l.push_back(j["loss"].get<double>());
        n.push_back(j["grad_norm"].get<double>());
      }
      ASSERT_EQ(l.size(), 8u) << name;
      if (losses.empty()) {
        losses = l, norms = n;
        EXPECT_LT(l.back(), l.front()) << "the loss should fall";
      }
      EXPECT_EQ(l, losses) << name;
      EXPECT_EQ(n, norms) << name;
    }
    // The adapters start as the identity: the first loss is the base model's.
    const std::string full = std::string(recipe) + "_full";
    CliRun r = train(full, recipe, 1, "--compile.graph_trainer");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(read_losses(dump(full)).at(0), losses.at(0));
  }
}

TEST_F(LoraE2E, ACheckpointHoldsTheAdaptersAndResumesExactly) {
  const std::string flags = kLora + kAllTargets + "--compile.graph_trainer --checkpoint.enable "
                            "--checkpoint.interval 4";
  CliRun r = train("whole", "llama3_debug", 8, flags);
  ASSERT_EQ(r.status, 0) << r.output;

  train::LoadedCheckpoint ck = train::CheckpointManager(dump("whole") + "/checkpoint").load(4);
  EXPECT_EQ(ck.model.size(), 2u * 7u * 2u);  // lora_A, lora_B x 7 targets x 2 layers
  for (const auto& [name, t] : ck.model) EXPECT_TRUE(is_lora_parameter(name)) << name;
  EXPECT_EQ(ck.optimizer.size(), 2 * ck.model.size());  // m and v of each adapter only
  for (const auto& [name, t] : ck.optimizer) EXPECT_TRUE(is_lora_parameter(name)) << name;

  fs::copy(dump("whole"), dump("resumed"), fs::copy_options::recursive);
  r = train("resumed", "llama3_debug", 8, flags + " --checkpoint.load_step 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(step 4)"), std::string::npos) << r.output;
  EXPECT_EQ(read_losses(dump("resumed")), read_losses(dump("whole")));

  // kiln convert: the adapters as a PEFT folder; merging that folder needs
  // the base, which a run from the seed never had in a folder.
  r = run_cli("convert --from " + dump("whole") + " --to " + dump("peft"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("to a PEFT adapter folder"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dump("peft") + "/adapter_model.safetensors"));
  r = run_cli("convert --from " + dump("peft") + " --to " + dump("merged") + " --merge-lora");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("does not name its base model"), std::string::npos) << r.output;
}

// The dry run plans what the run would train: every parameter, the frozen
// ones marked, and the adapters' count.
TEST_F(LoraE2E, TheDryRunMarksTheFrozenParameters) {
  CliRun r = run_cli("train --config llama3_debug --dry-run --json" + kLora + kAllTargets);
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  int64_t trained = 0, frozen = 0;
  for (const auto& p : j["parameters"]) {
    int64_t n = 1;
    for (int64_t d : p["full"]) n *= d;
    const bool adapter = is_lora_parameter(p["name"].get<std::string>());
    EXPECT_EQ(p["trained"].get<bool>(), adapter) << p["name"];
    (adapter ? trained : frozen) += n;
  }
  EXPECT_EQ(j["trained_params"].get<int64_t>(), trained);
  EXPECT_EQ(j["params"].get<int64_t>(), trained + frozen);
  EXPECT_GT(frozen, 10 * trained);
}

TEST_F(LoraE2E, BadSettingsAreErrorsNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"llama3_debug", "--lora.rank 4 --lora.targets q,kv"},
      {"llama3_debug", "--lora.rank -1"},
      {"llama3_debug", "--lora.rank 4 --lora.alpha 0"},
      {"llama3_debug", "--lora.rank 4 --parallelism.tensor_parallel_degree 2"},
      {"qwen3_moe_debug", "--lora.rank 4 --lora.targets q,gate"},
  };
  const std::vector<std::string> want = {
      "config: lora.targets: LoRA targets 'q,kv': 'kv' is not a layer LoRA can adapt",
      "config: lora.rank: must be non-negative",
      "config: lora.alpha: must be a positive number",
      "config: lora.rank: LoRA runs on data parallelism",
      "LoRA target 'gate': the model (qwen3_moe_debug) has no such layer",
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CliRun r = train("bad" + std::to_string(i), cases[i].first, 1, cases[i].second);
    EXPECT_NE(r.status, 0) << cases[i].second;
    EXPECT_NE(r.output.find(want[i]), std::string::npos) << cases[i].second << "\n" << r.output;
  }
}

}  // namespace
}  // namespace kiln::test
