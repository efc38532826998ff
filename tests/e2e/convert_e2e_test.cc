// `kiln convert` as a user runs it: a few steps of the llama3 debug recipe
// with checkpoints become Hugging Face folders in float32 (the checkpoint's
// weights bit for bit) and bfloat16 (the same weights rounded), with
// generation_config.json and the tokenizer; an HF folder becomes a kiln
// checkpoint that `kiln eval`, `kiln generate` and `kiln convert` read, and
// converting it back gives the same files; the eos ids of the folder's
// generation_config.json survive the round trip. Errors are one line and
// leave nothing at the destination.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "kiln/base/half.h"
#include "kiln/data/tokenizer.h"
#include "kiln/models/hf_dir.h"
#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_file(p)); }

// `want` with each f32 value rounded to bf16 (round to nearest even).
std::vector<float> rounded_to_bf16(const std::vector<float>& want) {
  std::vector<float> out;
  for (float v : want) out.push_back(float(bf16(v)));
  return out;
}

// Same names, shapes and dtype; values equal bit for bit after `round`.
void expect_weights(const nn::StateDict& got, const nn::StateDict& want, DType dtype,
                    bool round_to_bf16 = false) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    const Tensor& g = got.at(name);
    EXPECT_EQ(g.dtype(), dtype) << name;
    EXPECT_EQ(g.shape(), w.shape()) << name;
    std::vector<float> expected = w.to_vector<float>();
    if (round_to_bf16) expected = rounded_to_bf16(expected);
    const std::vector<float> values = g.to_vector<float>();
    ASSERT_EQ(values.size(), expected.size()) << name;
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(float_bits(values[i]), float_bits(expected[i])) << name << "[" << i << "]";
  }
}

// `kiln eval --json` on the test's documents: {"loss", "tokens", ...}.
nlohmann::json eval(const std::string& source, const fs::path& docs) {
  CliRun r = run_cli("eval " + source + " --data " + docs.string() + " --seq-len 32 --json");
  EXPECT_EQ(r.status, 0) << r.output;
  return nlohmann::json::parse(r.output.substr(r.output.rfind('{')));
}

class ConvertE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    root_ = temp_->path();
    write_grammar_corpus((root_ / "corpus.txt").string());
    run_ = root_ / "run";
    CliRun r = run_cli(debug_train_args((root_ / "corpus.txt").string(), run_.string(), 4,
                                        "--training.local_batch_size 4 --checkpoint.enable "
                                        "--checkpoint.interval 2 --lr_scheduler.warmup_steps 2"));
    ASSERT_EQ(r.status, 0) << r.output;
    std::ofstream(root_ / "docs.jsonl") << R"({"text": "the cat sat on the mat"})" << "\n"
                                        << R"({"text": "a bird saw the dog and the cat"})" << "\n";
  }
  static void TearDownTestSuite() { temp_.reset(); }

  // `kiln convert <args>`, which must succeed.
  static void convert(const std::string& args) {
    CliRun r = run_cli("convert " + args);
    ASSERT_EQ(r.status, 0) << r.output;
  }

  static nn::StateDict checkpoint_weights(int64_t step) {
    auto m = train::CheckpointManager((run_ / "checkpoint").string()).load(step).model;
    return nn::StateDict(m.begin(), m.end());
  }

  static std::optional<TempDir> temp_;
  static fs::path root_, run_;
};

std::optional<TempDir> ConvertE2E::temp_;
fs::path ConvertE2E::root_, ConvertE2E::run_;

TEST_F(ConvertE2E, ACheckpointBecomesAHuggingFaceFolderInFloat32AndBfloat16) {
  const fs::path f32 = root_ / "hf32", b16 = root_ / "hf16";
  CliRun r = run_cli("convert --from " + run_.string() + " --to " + f32.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step-4 (llama3_debug, step 4) to a Hugging Face folder (float32)"),
            std::string::npos)
      << r.output;
  convert("--from " + run_.string() + " --to " + b16.string() + " --dtype bfloat16");
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json",
                        "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(f32 / f)) << f;
    EXPECT_TRUE(fs::exists(b16 / f)) << f;
  }
  EXPECT_EQ(read_file(f32 / "tokenizer.json"), read_file(run_ / "tokenizer.json"));
  EXPECT_EQ(read_json(f32 / "config.json")["torch_dtype"], "float32");
  EXPECT_EQ(read_json(b16 / "config.json")["torch_dtype"], "bfloat16");

  const nn::StateDict want = checkpoint_weights(4);
  expect_weights(read_hf_weights(f32.string()), want, DType::f32);
  expect_weights(read_hf_weights(b16.string()), want, DType::bf16, /*round_to_bf16=*/true);

  // bos and eos of the run's tokenizer, as transformers writes them.
  const Tokenizer tok = Tokenizer::load((run_ / "tokenizer.json").string());
  ASSERT_TRUE(bos_token_id(tok) && eos_token_id(tok));
  const std::string want_generation = nlohmann::json{{"bos_token_id", *bos_token_id(tok)},
                                                     {"eos_token_id", *eos_token_id(tok)}}
                                          .dump(2) + "\n";
  EXPECT_EQ(read_file(f32 / "generation_config.json"), want_generation);
  EXPECT_EQ(read_file(b16 / "generation_config.json"), want_generation);

  // A step-N folder and a checkpoint folder name the same checkpoints.
  const fs::path step2 = root_ / "hf_step2", latest = root_ / "hf_latest";
  convert("--from " + (run_ / "checkpoint" / "step-2").string() + " --to " + step2.string());
  convert("--from " + (run_ / "checkpoint").string() + " --to " + latest.string());
  expect_weights(read_hf_weights(step2.string()), checkpoint_weights(2), DType::f32);
  EXPECT_EQ(read_file(latest / "model.safetensors"), read_file(f32 / "model.safetensors"));

  // The folder is the checkpoint's model: the same loss in `kiln eval`.
  EXPECT_EQ(eval("--hf " + f32.string(), root_ / "docs.jsonl")["loss"],
            eval("--checkpoint " + run_.string(), root_ / "docs.jsonl")["loss"]);
}

TEST_F(ConvertE2E, AHuggingFaceFolderBecomesACheckpointAndBackBitForBit) {
  const fs::path hf = root_ / "rt_hf", ck = root_ / "rt_ck", back = root_ / "rt_back";
  convert("--from " + run_.string() + " --to " + hf.string());
  // A generation_config.json with two eos ids, as Llama 3 instruct models have.
  std::ofstream(hf / "generation_config.json") << R"({"bos_token_id": 0, "eos_token_id": [1, 5]})";
  convert("--from " + hf.string() + " --to " + ck.string());
  EXPECT_TRUE(fs::exists(ck / "step-0" / "manifest.json"));
  EXPECT_TRUE(fs::exists(ck / "tokenizer.json"));

  // The checkpoint stands without the folder.
  const fs::path moved = root_ / "rt_hf_moved";
  fs::rename(hf, moved);
  const std::string from_ck = "--checkpoint " + ck.string();
  EXPECT_EQ(eval(from_ck, root_ / "docs.jsonl")["loss"],
            eval("--hf " + moved.string(), root_ / "docs.jsonl")["loss"]);
  CliRun g = run_cli("generate " + from_ck + " --prompt 'the cat' --max-new-tokens 6 "
                     "--temperature 0");
  EXPECT_EQ(g.status, 0) << g.output;
  EXPECT_NE(g.output.find("the cat"), std::string::npos) << g.output;

  convert("--from " + ck.string() + " --to " + back.string());
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_EQ(read_file(back / f), read_file(moved / f)) << f;
  expect_weights(read_hf_weights(back.string()), read_hf_weights(moved.string()), DType::f32);
  EXPECT_EQ(read_json(back / "generation_config.json")["eos_token_id"],
            nlohmann::json::array({1, 5}));
}

// Names in `dir` starting with `name` (the destination and its temporaries).
std::vector<std::string> entries_named(const fs::path& dir, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(name)) out.push_back(e.path().filename());
  return out;
}

// A failed `kiln convert <args>`: a non-zero exit and one line naming `what`.
void expect_error(const std::string& args, const std::string& what) {
  CliRun r = run_cli("convert " + args);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(r.output.starts_with("kiln: error: ")) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
}

TEST_F(ConvertE2E, ErrorsAreOneLineAndLeaveNoDestination) {
  const fs::path out = root_ / "errors";
  fs::create_directories(out);
  const std::string to = " --to " + (out / "dst").string();
  expect_error("--from " + (root_ / "missing").string() + to,
               "cannot convert '" + (root_ / "missing").string() + "': it does not exist");
  const fs::path neither = root_ / "neither";
  fs::create_directories(neither);
  std::ofstream(neither / "notes.txt") << "not a model\n";
  expect_error("--from " + neither.string() + to,
               "'" + neither.string() + "': it is neither a Hugging Face folder");
  expect_error("--from " + run_.string() + to + " --dtype float16",
               "--dtype must be float32 or bfloat16, got 'float16'");
  // An HF folder whose weights are gone fails while reading.
  const fs::path broken = root_ / "broken";
  convert("--from " + run_.string() + " --to " + broken.string());
  fs::remove(broken / "model.safetensors");
  expect_error("--from " + broken.string() + to, broken.string());
  EXPECT_TRUE(entries_named(out, "dst").empty());

  // An existing destination is kept unless --overwrite; then replaced whole.
  convert("--from " + run_.string() + to);
  std::ofstream(out / "dst" / "old.txt") << "old\n";
  expect_error("--from " + run_.string() + to, "it already exists (--overwrite replaces it)");
  EXPECT_EQ(read_file(out / "dst" / "old.txt"), "old\n");
  convert("--from " + run_.string() + to + " --overwrite");
  EXPECT_FALSE(fs::exists(out / "dst" / "old.txt"));
  EXPECT_TRUE(fs::exists(out / "dst" / "generation_config.json"));
  expect_error("--from " + (out / "dst").string() + " --to " + (out / "dst").string() +
                   " --overwrite",
               "into itself");
  // --overwrite replaces a model folder or an empty one, never a folder
  // that holds the source, nor anyone's other data.
  expect_error("--from " + (out / "dst").string() + " --to " + out.string() + " --overwrite",
               "replacing it would delete the source, which is inside it");
  EXPECT_TRUE(fs::exists(out / "dst" / "config.json"));
  fs::create_directories(out / "data");
  std::ofstream(out / "data" / "notes.txt") << "mine\n";
  expect_error("--from " + run_.string() + " --to " + (out / "data").string() + " --overwrite",
               "--overwrite replaces a Hugging Face, PEFT adapter or kiln checkpoint folder, or "
               "an empty one, and this is none of those");
  EXPECT_EQ(read_file(out / "data" / "notes.txt"), "mine\n");

  // A file in the way fails before anything is written (in either
  // direction), and stays.
  std::ofstream(out / "file") << "a file\n";
  for (const fs::path& from : {run_, out / "dst"}) {
    expect_error("--from " + from.string() + " --to " + (out / "file").string() + " --overwrite",
                 "it exists and is not a folder");
    EXPECT_EQ(entries_named(out, "file"), std::vector<std::string>{"file"});
    EXPECT_EQ(read_file(out / "file"), "a file\n");
  }
}

}  // namespace
}  // namespace kiln::test
