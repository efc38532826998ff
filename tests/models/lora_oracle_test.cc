// LoRA against peft: kiln's PEFT folders load in peft onto the transformers
// model of the same base (every tensor placed, none missing), and the
// adapted model's logits equal kiln's adapted model's; the merged folder
// (`kiln convert --merge-lora`) loads in transformers with those logits
// too. Once for adapters kiln writes itself (random, so every one counts)
// on each family, once for a LoRA fine-tune's export and checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/io/safetensors.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/lora.h"
#include "kiln/train/convert.h"
#include "kiln/train/peft_adapter.h"
#include "kiln/train/saved_run.h"
#include "tests/support/cli.h"
#include "tests/support/python.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::vector<std::vector<int32_t>> kIds = {{5, 17, 300, 2, 9, 1200, 77, 4},
                                                {1000, 33, 8, 640, 12, 1, 90, 3}};

Tensor ids_tensor() {
  std::vector<int32_t> flat;
  for (const auto& row : kIds) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, {int64_t(kIds.size()), int64_t(kIds[0].size())});
}

// peft's and transformers' logits (hf_lora.py) for base + adapter and merged.
struct Reference {
  Tensor peft, merged;
};

Reference run_peft(const test::TempDir& dir, const std::string& base, const std::string& adapter,
                   const std::string& merged) {
  const std::string out = dir / "peft.safetensors";
  EXPECT_TRUE(test::run_oracle_script(
      "hf_lora.py",
      cat("--base '", base, "' --adapter '", adapter, "' --merged '", merged, "' --ids '",
          nlohmann::json(kIds).dump(), "' --out '", out, "'"),
      dir / "peft.log"));
  SafetensorsFile f(out);
  return {f.get("peft_logits"), f.get("merged_logits")};
}

class LoraOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(LoraOracle, PeftLoadsKilnsAdaptersWithTheAdaptedLogits) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 16;
  auto model = build_model(c, DType::f32, 21);
  test::TempDir dir;
  save_hf_model(*model, dir / "base");
  const bool moe = c.family == "qwen3_moe";
  LoraOptions o{4, 8, parse_lora_targets(moe ? "q,k,v,o" : "q,k,v,o,gate,up,down")};
  Generator g(5), gb(6);
  add_lora(*model, o, g);
  train::PeftAdapter adapter{o, dir / "base", {}};
  for (auto& [name, p] : model->named_parameters()) {
    if (name.find(".lora_B.") != std::string::npos) *p = normal(p->shape(), 0, 0.1, gb);
    if (is_lora_parameter(name)) adapter.adapters[name] = *p;
  }
  train::save_peft_adapter(adapter, dir / "adapter", DType::f32);
  train::ConvertOptions merge;
  merge.merge_lora = true;
  train::convert_model(dir / "adapter", dir / "merged", merge);

  Reference want = run_peft(dir, dir / "base", dir / "adapter", dir / "merged");
  const Tensor got = model->logits(ids_tensor());
  EXPECT_TRUE(test::all_close(got, want.peft, 1e-4, 1e-4));
  EXPECT_TRUE(test::all_close(want.merged, want.peft, 1e-4, 1e-4));
  // The adapters count: the base model's logits are elsewhere.
  EXPECT_FALSE(
      test::all_close(load_hf_model(dir / "base")->logits(ids_tensor()), want.peft, 1e-3, 1e-3));
}

INSTANTIATE_TEST_SUITE_P(Families, LoraOracle,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

// A LoRA fine-tune of an HF folder (a short run's export): its PEFT export
// loads in peft, whose logits equal kiln's model of the checkpoint (the
// adapters merged) and transformers' of `kiln convert --merge-lora`'s folder.
TEST(LoraOracleRun, AFineTunesExportLoadsInPeft) {
  test::TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  test::write_grammar_corpus(corpus);
  test::CliRun pre = test::run_cli(
      test::debug_train_args(corpus, dir / "pre", 3, "--checkpoint.last_save_in_hf"));
  ASSERT_EQ(pre.status, 0) << pre.output;
  test::CliRun lora = test::run_cli(test::debug_train_args(
      corpus, dir / "lora", 6,
      cat("--checkpoint.initial_load_path ", dir / "pre/hf",
          " --lora.rank 4 --lora.alpha 8 --lora.targets q,v,down --optimizer.lr 0.01"
          " --checkpoint.enable --checkpoint.last_save_in_hf")));
  ASSERT_EQ(lora.status, 0) << lora.output;
  EXPECT_NE(lora.output.find("exported the LoRA adapters as a PEFT folder"), std::string::npos);
  test::CliRun merged = test::run_cli(
      cat("convert --from ", dir / "lora", " --to ", dir / "merged", " --merge-lora"));
  ASSERT_EQ(merged.status, 0) << merged.output;

  Reference want = run_peft(dir, dir / "pre/hf", dir / "lora/hf", dir / "merged");
  const Tensor got = train::load_checkpoint_model(dir / "lora").model->logits(ids_tensor());
  EXPECT_TRUE(test::all_close(got, want.peft, 1e-4, 1e-4));
  EXPECT_TRUE(test::all_close(want.merged, want.peft, 1e-4, 1e-4));
  EXPECT_FALSE(test::all_close(load_hf_model(dir / "pre/hf")->logits(ids_tensor()), want.peft,
                               1e-4, 1e-4))
      << "training should have moved the adapters";
}

}  // namespace
}  // namespace kiln
