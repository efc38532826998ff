// The training config: TOML recipes, --section.key flags, overrides, the
// errors (nearest key, accepted values) and --print-config's round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/compiler/remat.h"
#include "kiln/data/text_source.h"
#include "kiln/models/hf_config.h"
#include "kiln/optim/schedule.h"
#include "kiln/runtime/threads.h"
#include "kiln/train/config.h"
#include "kiln/train/recipes.h"
#include "kiln/train/toml_shape.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln::train {
namespace {

using test::error_of;

namespace fs = std::filesystem;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << text

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(TrainConfig, TorchTitanNamesExist) {
  std::vector<std::string> keys = config_keys();
  for (const char* k :
       {"job.dump_folder", "training.steps", "training.seed", "training.local_batch_size",
        "training.seq_len", "checkpoint.enable", "checkpoint.interval", "checkpoint.folder",
        "checkpoint.load_step", "metrics.log_freq", "model.name", "optimizer.lr",
        "lr_scheduler.warmup_steps", "compile.enable", "runtime.eager_mode",
        "parallelism.data_parallel_shard_degree", "activation_checkpoint.mode",
        "profiler.enable_profiling"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
}

TEST(TrainConfig, TomlFillsEveryType) {
  TrainConfig c;
  apply_toml(c, R"(
[job]
dump_folder = "/tmp/run"
[training]
steps = 42
max_norm = 2          # an integer is accepted for a number
[optimizer]
lr = 1.5e-3
[checkpoint]
enable = true
[lr_scheduler]
decay_ratio = 0.25
[model]
n_layers = 3
qk_norm = true
)",
             "test.toml");
  EXPECT_EQ(c.job.dump_folder, "/tmp/run");
  EXPECT_EQ(c.training.steps, 42);
  EXPECT_EQ(c.training.max_norm, 2.0);
  EXPECT_EQ(c.optimizer.lr, 1.5e-3);
  EXPECT_TRUE(c.checkpoint.enable);
  EXPECT_EQ(c.lr_scheduler.decay_ratio, 0.25);
  EXPECT_EQ(c.model.changes.get<int64_t>("n_layers"), 3);
  EXPECT_EQ(c.model.changes.get<bool>("qk_norm"), true);
  EXPECT_FALSE(c.model.changes.get<int64_t>("dim").has_value());
}

TEST(TrainConfig, TomlUnknownKeyNamesNearestAndLine) {
  TrainConfig c;
  std::string e = error_of([&] { apply_toml(c, "[training]\nsteps = 1\nstep = 5\n", "r.toml"); });
  EXPECT_CONTAINS(e, "r.toml:3");
  EXPECT_CONTAINS(e, "'training.step'");
  EXPECT_CONTAINS(e, "did you mean 'training.steps'");
  e = error_of([&] { apply_toml(c, "[traning]\nsteps = 5\n", "r.toml"); });
  EXPECT_CONTAINS(e, "did you mean 'training.steps'");
  EXPECT_CONTAINS(e, "sections: job, model, training");
  e = error_of([&] { apply_toml(c, "steps = 5\n", "r.toml"); });
  EXPECT_CONTAINS(e, "did you mean 'training.steps'");
}

// toml++ recurses per nesting level: 50,000 levels overflowed the stack.
TEST(TrainConfig, TomlNestingAndSizeAreBoundedBeforeParsing) {
  TrainConfig c;
  std::string header = "[a";
  for (int i = 0; i < 50000; ++i) header += ".a";
  std::string e = error_of([&] { apply_toml(c, "# deep\n" + header + ".b]\nx = 1\n", "r.toml"); });
  EXPECT_CONTAINS(e, "r.toml:2: nests more than 32 levels");
  e = error_of([&] { apply_toml(c, "[training]\nsteps = " + std::string(50000, '[') + "\n", "r.toml"); });
  EXPECT_CONTAINS(e, "r.toml:2: nests more than 32 levels");
  e = error_of([&] { apply_toml(c, "x = {a = " + std::string(40, '{') + "\n", "r.toml"); });
  EXPECT_CONTAINS(e, "r.toml:1: nests more than 32 levels");
  e = error_of([&] { apply_toml(c, std::string(2 << 20, '#'), "r.toml"); });
  EXPECT_CONTAINS(e, "r.toml: 2097152 bytes; a recipe may have at most 1048576");
  // Brackets, dots and quotes inside strings and comments count for nothing.
  apply_toml(c,
             "# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ a.a.a.a\n[job]\ndump_folder = \"" +
                 std::string(40, '[') + std::string(40, '.') + "\"\ndescription = '''\n" +
                 std::string(40, '{') + "'''\n",
             "r.toml");
  EXPECT_EQ(c.job.dump_folder, std::string(40, '[') + std::string(40, '.'));
  EXPECT_EQ(c.job.description, std::string(40, '{'));
}

// The choices a key lists are the ones its parser takes: "constant" was
// listed for lr_scheduler.decay_type and then refused when the run started.
TEST(TrainConfig, ChoicesAreWhatTheParsersAccept) {
  TrainConfig c;
  for (const std::string& name : optim::decay_type_names()) {
    apply_setting(c, "lr_scheduler.decay_type", name);
    EXPECT_EQ(optim::decay_type_name(optim::parse_decay_type(c.lr_scheduler.decay_type)), name);
  }
  EXPECT_CONTAINS(error_of([&] { apply_setting(c, "lr_scheduler.decay_type", "constant"); }),
                  "expected one of linear, sqrt, cosine");
  for (const std::string& name : data::source_format_names()) {
    apply_setting(c, "data.format", name);
    EXPECT_EQ(data::source_format_name(data::parse_source_format(c.data.format)), name);
  }
  for (const std::string& name : data::text_split_names()) {
    apply_setting(c, "data.text_split", name);
    EXPECT_EQ(data::text_split_name(data::parse_text_split(c.data.text_split)), name);
  }
  for (const char* name : {"none", "full", "selective", "offload"}) {
    apply_setting(c, "activation_checkpoint.mode", name);
    EXPECT_STREQ(compiler::remat_policy_name(compiler::parse_remat_policy(c.activation_checkpoint.mode)), name);
  }
}

// Graph split refuses what it cannot do, naming the keys; offload works everywhere.
TEST(TrainConfig, GraphSplitAndOffloadCombinations) {
  auto refusal = [](std::initializer_list<std::pair<const char*, const char*>> settings) {
    TrainConfig c;
    for (auto [key, value] : settings) apply_setting(c, key, value);
    return error_of([&] { finalize(c); });
  };
  EXPECT_CONTAINS(refusal({{"compile.graph_split", "true"}}), "needs --compile.graph_trainer");
  EXPECT_CONTAINS(refusal({{"compile.graph_trainer", "true"}, {"compile.graph_split", "true"},
                           {"compile.scan_layers", "true"}}),
                  "compile.graph_split: does not work with compile.scan_layers");
  EXPECT_CONTAINS(refusal({{"compile.graph_trainer", "true"}, {"compile.graph_split_layers", "2"}}),
                  "set --compile.graph_split too");
  EXPECT_CONTAINS(refusal({{"compile.graph_trainer", "true"}, {"compile.graph_split", "true"},
                           {"compile.graph_split_layers", "-1"}}),
                  "compile.graph_split_layers: must be non-negative");
  TrainConfig ok;
  for (auto [key, value] : {std::pair{"compile.graph_trainer", "true"}, {"compile.graph_split", "true"},
                            {"compile.graph_split_layers", "4"}, {"activation_checkpoint.mode", "offload"}})
    apply_setting(ok, key, value);
  finalize(ok);
  TrainConfig scan;
  apply_setting(scan, "compile.scan_layers", "true");
  apply_setting(scan, "activation_checkpoint.mode", "offload");
  finalize(scan);
}

// Replay replays compiled programs: op-by-op eager has none to replay.
TEST(TrainConfig, ReplayNeedsCompiledPrograms) {
  TrainConfig eager;
  apply_setting(eager, "compile.replay", "true");
  EXPECT_CONTAINS(error_of([&] { finalize(eager); }),
                  "compile.replay: replays compiled programs; turn on --compile.enable or "
                  "--compile.graph_trainer too");
  for (const char* rung : {"compile.enable", "compile.graph_trainer"}) {
    TrainConfig ok;
    apply_setting(ok, "compile.replay", "true");
    apply_setting(ok, rung, "true");
    finalize(ok);
    EXPECT_TRUE(ok.compile.replay);
  }
}

// A background build is the graph trainer's: no other rung would use it.
TEST(TrainConfig, BackgroundCompileNeedsTheGraphTrainer) {
  for (const char* rung : {"", "compile.enable"}) {
    TrainConfig c;
    apply_setting(c, "compile.background", "true");
    if (*rung) apply_setting(c, rung, "true");
    EXPECT_CONTAINS(error_of([&] { finalize(c); }),
                    "compile.background: builds the graph trainer's step program while the first "
                    "steps run op by op, so it needs --compile.graph_trainer");
  }
  TrainConfig ok;
  apply_setting(ok, "compile.background", "true");
  apply_setting(ok, "compile.graph_trainer", "true");
  finalize(ok);
  EXPECT_TRUE(ok.compile.background);
}

// model.hf_dir is checkpoint.initial_load_path's other name; chat data
// needs a tokenizer with a chat template and a data path.
TEST(TrainConfig, HfDirAndChatData) {
  auto refusal = [](std::initializer_list<std::pair<const char*, const char*>> settings) {
    return error_of([&] {
      TrainConfig c;
      for (auto [key, value] : settings) apply_setting(c, key, value);
      finalize(c);
    });
  };
  test::TempDir dir;
  const std::string hf = dir.write("qwen3/config.json",
                                   hf_config_json(kiln::model_config("qwen3_debug")));
  const std::string folder = fs::path(hf).parent_path().string();
  TrainConfig c;
  apply_setting(c, "model.hf_dir", folder);
  finalize(c);
  EXPECT_EQ(c.checkpoint.initial_load_path, folder);
  EXPECT_CONTAINS(refusal({{"model.hf_dir", "/a"}, {"checkpoint.initial_load_path", "/b"}}),
                  "model.hf_dir: is '/a' but checkpoint.initial_load_path is '/b'");
  EXPECT_CONTAINS(refusal({{"data.format", "chat"}, {"data.path", "c.jsonl"}}),
                  "chat renders conversations with a tokenizer's chat template");
  EXPECT_CONTAINS(refusal({{"data.format", "chat"}, {"model.tokenizer_path", "tok"}}),
                  "chat needs --data.path");
  EXPECT_CONTAINS(refusal({{"data.train_on", "answers"}}), "data.train_on");
  TrainConfig chat;
  for (auto [key, value] : {std::pair{"data.format", "chat"}, {"data.path", "c.jsonl"},
                            {"model.hf_dir", folder.c_str()}, {"data.train_on", "all"}})
    apply_setting(chat, key, value);
  finalize(chat);
}

TEST(TrainConfig, TomlBadTypeAndSyntax) {
  TrainConfig c;
  std::string e = error_of([&] { apply_toml(c, "[training]\nsteps = \"ten\"\n", "r.toml"); });
  EXPECT_CONTAINS(e, "training.steps");
  EXPECT_CONTAINS(e, "expected an integer");
  e = error_of([&] { apply_toml(c, "[training]\nsteps = 1.5\n", "r.toml"); });
  EXPECT_CONTAINS(e, "expected an integer");
  // The value as written: 2.0 and "2" are not integers, though they print as 2.
  e = error_of([&] { apply_toml(c, "[training]\nsteps = 2.0\n", "r.toml"); });
  EXPECT_CONTAINS(e, "bad value '2.0' for training.steps: expected an integer");
  e = error_of([&] { apply_toml(c, "[training]\nsteps = \"2\"\n", "r.toml"); });
  EXPECT_CONTAINS(e, "bad value '\"2\"' for training.steps: expected an integer");
  // TOML writes infinity and NaN, which no number setting means.
  for (const char* v : {"inf", "-inf", "nan"}) {
    e = error_of([&] { apply_toml(c, cat("[optimizer]\nlr = ", v, "\n"), "r.toml"); });
    EXPECT_CONTAINS(e, "r.toml:2");
    EXPECT_CONTAINS(e, "for optimizer.lr: expected a finite number");
  }
  e = error_of([&] { apply_toml(c, "[runtime]\neager_mode = \"lazy\"\n", "r.toml"); });
  EXPECT_CONTAINS(e, "runtime.eager_mode");
  EXPECT_CONTAINS(e, "strict, debug, defer_and_fuse");
  e = error_of([&] { apply_toml(c, "[training\nsteps = 1\n", "broken.toml"); });
  EXPECT_CONTAINS(e, "broken.toml:1");
  EXPECT_CONTAINS(e, "not valid TOML");
}

TEST(TrainConfig, CommandLineForms) {
  TrainCommandLine cl = parse_train_command_line(
      {"--config", "r.toml", "--training.steps=5", "--training.seed", "7", "--compile.enable",
       "--checkpoint.enable", "false", "--override", "attention=flash", "--print-config",
       "--metrics.enable_tensorboard"});
  EXPECT_EQ(cl.config, "r.toml");
  EXPECT_TRUE(cl.print_config);
  std::vector<std::pair<std::string, std::string>> want = {
      {"training.steps", "5"},           {"training.seed", "7"},
      {"compile.enable", "true"},        {"checkpoint.enable", "false"},
      {"--override", "attention=flash"}, {"metrics.enable_tensorboard", "true"}};
  EXPECT_EQ(cl.settings, want);
}

TEST(TrainConfig, CommandLineErrorsNameTheKey) {
  std::string e = error_of([] { parse_train_command_line({"--traning.steps", "5"}); });
  EXPECT_CONTAINS(e, "traning.steps");
  EXPECT_CONTAINS(e, "did you mean 'training.steps'");
  e = error_of([] { parse_train_command_line({"--training.steps"}); });
  EXPECT_CONTAINS(e, "--training.steps needs a value");
  e = error_of([] { parse_train_command_line({"stray"}); });
  EXPECT_CONTAINS(e, "unexpected argument 'stray'");
  e = error_of([] { parse_train_command_line({"--checkpoint.enable", "maybe"}); });
  EXPECT_CONTAINS(e, "unexpected argument 'maybe' after --checkpoint.enable, a switch (alone it "
                     "means true; its values are true and false: --checkpoint.enable=false)");
}

TEST(TrainConfig, SettingBadValues) {
  TrainConfig c;
  std::string e = error_of([&] { apply_setting(c, "training.steps", "abc"); });
  EXPECT_CONTAINS(e, "bad value 'abc' for training.steps: expected an integer");
  e = error_of([&] { apply_setting(c, "runtime.eager_mode", "defer"); });
  EXPECT_CONTAINS(e, "did you mean 'defer_and_fuse'");
  EXPECT_CONTAINS(e, "expected one of strict, debug, defer_and_fuse");
  e = error_of([&] { apply_setting(c, "compile.enable", "maybe"); });
  EXPECT_CONTAINS(e, "expected true or false");
  e = error_of([&] { apply_setting(c, "optimizer.lr", "1e-3x"); });
  EXPECT_CONTAINS(e, "expected a finite number");
  e = error_of([&] { apply_setting(c, "model.name", "llama3_debgu"); });
  EXPECT_CONTAINS(e, "did you mean 'llama3_debug'");
  apply_setting(c, "optimizer.lr", "2.5e-4");
  EXPECT_EQ(c.optimizer.lr, 2.5e-4);
}

TEST(TrainConfig, OverrideSwapsComponents) {
  TrainConfig c;
  apply_override(c, "attention=flash");
  apply_override(c, "model.loss=fused_ce");
  apply_override(c, "moe=grouped");
  apply_override(c, "norm=composite");
  EXPECT_EQ(c.model.changes.get<std::string>("attention_impl"), "flash");
  EXPECT_EQ(c.model.changes.get<std::string>("loss_impl"), "fused_ce");
  EXPECT_EQ(c.model.changes.get<std::string>("moe_impl"), "grouped");
  finalize(c);
  ModelConfig m = resolve_model_config(c);
  EXPECT_EQ(m.attention_impl, "flash");
  EXPECT_EQ(m.loss_impl, "fused_ce");
  EXPECT_EQ(m.moe_impl, "grouped");
  EXPECT_EQ(m.norm_impl, "composite");
  std::string e = error_of([&] { apply_override(c, "attn=flash"); });
  EXPECT_CONTAINS(e, "did you mean 'attention'");
  EXPECT_CONTAINS(e, "components: attention, loss, moe, norm");
  e = error_of([&] { apply_override(c, "attention=splash"); });
  EXPECT_CONTAINS(e, "model.attention_impl");
  EXPECT_CONTAINS(e, "composite, flash");
  e = error_of([&] { apply_override(c, "attention"); });
  EXPECT_CONTAINS(e, "component=impl");
}

TEST(TrainConfig, FinalizeFillsTheModelAndChecksValues) {
  TrainConfig c;
  c.model.name = "qwen3_debug";
  apply_setting(c, "model.n_layers", "3");
  c.training.seq_len = 64;
  finalize(c);
  const ModelConfig& r = model_config("qwen3_debug");
  EXPECT_EQ(c.model.changes.get<int64_t>("dim"), r.dim);
  EXPECT_EQ(c.model.changes.get<int64_t>("head_dim"), r.head_dim);
  EXPECT_EQ(c.model.changes.get<bool>("qk_norm"), true);
  EXPECT_EQ(c.model.changes.get<int64_t>("n_layers"), 3);
  EXPECT_EQ(c.model.changes.get<std::string>("norm_impl"), r.norm_impl);
  ModelConfig m = resolve_model_config(c);
  EXPECT_EQ(m.n_layers, 3);
  EXPECT_EQ(m.seq_len, 64);
  EXPECT_EQ(m.family, "qwen3");

  TrainConfig bad;
  bad.training.steps = 0;
  EXPECT_CONTAINS(error_of([&] { finalize(bad); }), "training.steps");
  bad = TrainConfig();
  bad.training.global_batch_size = 12;  // local is 8
  EXPECT_CONTAINS(error_of([&] { finalize(bad); }), "training.global_batch_size");
  bad = TrainConfig();
  apply_setting(bad, "model.n_kv_heads", "3");  // 4 heads are not a multiple of 3
  EXPECT_CONTAINS(error_of([&] { finalize(bad); }), "[model]");
  // (TOML can write inf and nan; the command line cannot.)
  for (double value : {0.0, -5.0, double(INFINITY), double(NAN)})
    for (bool checkpoint : {false, true}) {
      bad = TrainConfig();
      (checkpoint ? bad.checkpoint.timeout_seconds : bad.comm.timeout_seconds) = value;
      EXPECT_CONTAINS(error_of([&] { finalize(bad); }),
                      cat(checkpoint ? "checkpoint" : "comm",
                          ".timeout_seconds: must be a positive number of seconds"));
    }
  bad = TrainConfig();
  bad.job.dump_folder = "";
  EXPECT_CONTAINS(error_of([&] { finalize(bad); }), "job.dump_folder: must name the folder");
  for (int64_t threads : {int64_t(-1), int64_t(kMaxThreads) + 1}) {
    bad = TrainConfig();
    bad.runtime.num_threads = threads;
    EXPECT_CONTAINS(error_of([&] { finalize(bad); }),
                    cat("runtime.num_threads: must be from 0 (all cores) to ", kMaxThreads));
  }
  TrainConfig accum;
  accum.training.global_batch_size = 32;
  finalize(accum);
  EXPECT_EQ(grad_accum_steps(accum), 4);
}

// A fine-tune's folder decides the architecture fields the recipe leaves
// unset, and the finalized config records them, so that it stands without
// the folder; a field the recipe sets to another value is refused.
TEST(TrainConfig, AFineTunesFolderDecidesWhatTheRecipeLeavesUnset) {
  test::TempDir dir;
  ModelConfig folder = kiln::model_config("qwen3_debug");
  folder.n_layers = 3;
  folder.vocab_size = 300;
  dir.write("hf/config.json", hf_config_json(folder));
  TrainConfig c;
  c.model.name = "llama3_debug";
  c.checkpoint.initial_load_path = dir / "hf";
  finalize(c);
  const ModelConfig m = resolve_model_config(c);
  EXPECT_EQ(m.family, "qwen3");
  EXPECT_EQ(m.n_layers, 3);
  EXPECT_EQ(m.vocab_size, 300);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(c.model.changes.get<int64_t>("n_layers"), 3);
  EXPECT_EQ(c.model.changes.get<int64_t>("vocab_size"), 300);

  TrainConfig set;
  set.checkpoint.initial_load_path = dir / "hf";
  apply_setting(set, "model.n_layers", "2");
  finalize(set);
  EXPECT_CONTAINS(error_of([&] { resolve_model_config(set); }),
                  "has n_layers = 3 but the recipe sets model.n_layers = 2");

  fs::remove_all(dir / "hf");
  TrainConfig back;
  apply_toml(back, to_toml(c), "printed");
  finalize(back);
  EXPECT_EQ(to_toml(back), to_toml(c));
}

TEST(TrainConfig, PrintConfigRoundTrips) {
  TrainConfig c;
  apply_setting(c, "job.description", "quotes \" and \\ and\ttabs");
  apply_setting(c, "optimizer.lr", "0.0003");
  apply_setting(c, "optimizer.eps", "1e-12");
  apply_setting(c, "model.rope_theta", "500000");
  apply_setting(c, "lr_scheduler.decay_ratio", "0.1");
  finalize(c);
  std::string text = to_toml(c);
  EXPECT_CONTAINS(text, "[training]\nsteps = 10000\n");
  EXPECT_CONTAINS(text, "lr = 0.0003\n");
  EXPECT_CONTAINS(text, "rope_theta = 500000.0\n");
  TrainConfig back;
  apply_toml(back, text, "printed");
  finalize(back);
  EXPECT_EQ(to_toml(back), text);
  EXPECT_EQ(back.job.description, c.job.description);
  EXPECT_EQ(back.optimizer.eps, 1e-12);
  EXPECT_EQ(back.lr_scheduler.decay_ratio, 0.1);
}

// Every shipped recipe (each recipes/*.toml, so a new one is covered too)
// parses, finalizes and prints a config that reads back the same.
TEST(TrainConfig, ShippedRecipesParseAndRoundTrip) {
  fs::path dir = fs::path(KILN_SOURCE_DIR) / "recipes";
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    Recipe r = find_recipe(entry.path().string());
    TrainCommandLine cl;
    cl.config = r.origin;
    TrainConfig c = load_train_config(cl);
    EXPECT_NE(c.model.name, "");
    TrainConfig back;
    apply_toml(back, to_toml(c), "printed");
    finalize(back);
    EXPECT_EQ(to_toml(back), to_toml(c));
    seen.insert(name);
  }
  // The recipes the issues name, and the default, must be among them.
  for (const char* name : {"default", "llama3_debug", "qwen3_debug", "qwen3_moe_debug", "llama3_8b",
                           "llama3_70b", "qwen3_8b", "qwen3_30b_a3b", "llama3_100m"})
    EXPECT_TRUE(seen.count(name)) << "recipes/" << name << ".toml is missing";
}

TEST(TrainConfig, LoadAppliesSettingsInOrder) {
  TrainCommandLine cl = parse_train_command_line(
      {"--config", (fs::path(KILN_SOURCE_DIR) / "recipes" / "llama3_debug.toml").string(),
       "--training.steps=3", "--training.steps=4", "--model.attention_impl=flash", "--override",
       "attention=composite"});
  TrainConfig c = load_train_config(cl);
  EXPECT_EQ(c.training.steps, 4);
  EXPECT_EQ(c.model.changes.get<std::string>("attention_impl"), "composite");
  EXPECT_EQ(c.model.name, "llama3_debug");
}

TEST(Recipes, FoundByNameWithSuggestions) {
  Recipe r = find_recipe("qwen3_debug");
  EXPECT_CONTAINS(r.origin, "qwen3_debug.toml");
  EXPECT_CONTAINS(r.text, "qwen3_debug");
  std::string e = error_of([] { find_recipe("llama3_debgu"); });
  EXPECT_CONTAINS(e, "did you mean 'llama3_debug'");
  EXPECT_CONTAINS(e, "qwen3_moe_debug");
  e = error_of([] { find_recipe("/no/such/recipe.toml"); });
  EXPECT_CONTAINS(e, "/no/such/recipe.toml");
  e = error_of([] { find_recipe(KILN_SOURCE_DIR "/recipes"); });
  EXPECT_CONTAINS(e, "/recipes' is a folder; --config takes a recipe file (.toml) or a recipe's name");
  e = error_of([] { find_recipe("/dev/zero"); });
  EXPECT_CONTAINS(e, "'/dev/zero' is not a regular file");
}

// A huge file is refused by its size, read no further than the limit.
TEST(Recipes, AHugeRecipeIsRefusedBySize) {
  test::TempDir dir;
  const std::string path = dir / "huge.toml";
  std::ofstream(path) << std::string(3 << 20, '#');
  Recipe r = find_recipe(path);
  EXPECT_EQ(r.text.size(), kMaxTomlBytes + 1);
  TrainConfig c;
  EXPECT_CONTAINS(error_of([&] { apply_toml(c, r.text, r.origin); }), "huge.toml: 1048577 bytes");
}

TEST(Recipes, DefaultIsEmbedded) {
  std::string file = read(fs::path(KILN_SOURCE_DIR) / "recipes" / "default.toml");
  EXPECT_EQ(std::string(embedded_default_recipe()), file);
  EXPECT_EQ(default_recipe().text, file);
}

}  // namespace
}  // namespace kiln::train
