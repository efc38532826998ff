// PEFT adapter folders (train/peft_adapter.h): a folder written reads back
// to the same options, base model and tensors (with PEFT's name prefix on
// disk); configs of what kiln's LoRA does not do are refused naming the key.
#include "kiln/train/peft_adapter.h"

#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln::train {
namespace {

using test::error_of;

TEST(PeftAdapter, AFolderReadsBackWithPeftsNames) {
  test::TempDir dir;
  PeftAdapter a;
  a.options = {4, 8, {"q", "down"}};
  a.base_model = "/models/base";
  const std::string q = "model.layers.0.self_attn.q_proj.";
  a.adapters[q + "lora_A.weight"] = test::random_tensor({4, 6}, DType::f32, 1);
  a.adapters[q + "lora_B.weight"] = test::random_tensor({6, 4}, DType::f32, 2);
  save_peft_adapter(a, dir / "adapter", DType::bf16);
  SafetensorsFile file(dir / "adapter/adapter_model.safetensors");
  EXPECT_EQ(file.names(), (std::vector<std::string>{
                              "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                              "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"}));
  EXPECT_EQ(file.get(file.names()[0]).dtype(), DType::bf16);

  PeftAdapter b = read_peft_adapter(dir / "adapter");
  EXPECT_EQ(b.options.rank, 4);
  EXPECT_EQ(b.options.alpha, 8);
  EXPECT_EQ(b.options.targets, (std::vector<std::string>{"q", "down"}));
  EXPECT_EQ(b.base_model, "/models/base");
  ASSERT_EQ(b.adapters.size(), 2u);
  for (const auto& [name, t] : a.adapters)
    EXPECT_TRUE(test::all_close(b.adapters.at(name), t.to(DType::bf16).to(DType::f32), 0, 0));
}

TEST(PeftAdapter, ConfigsOfWhatKilnDoesNotDoAreRefused) {
  const std::string base =
      R"("peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"])";
  auto error = [&](const std::string& more) {
    return error_of([&] { parse_peft_config("{" + base + more + "}", "cfg"); });
  };
  EXPECT_EQ(error(""), "");
  EXPECT_NE(error(R"(, "use_dora": true)").find("cfg: \"use_dora\" is true"), std::string::npos);
  EXPECT_NE(error(R"(, "bias": "all")").find("cfg: bias = 'all'"), std::string::npos);
  EXPECT_NE(error(R"(, "modules_to_save": ["lm_head"])").find("\"modules_to_save\" is set"),
            std::string::npos);
  EXPECT_NE(error(R"(, "rank_pattern": {"q_proj": 8})").find("\"rank_pattern\" is set"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_peft_config(R"({"peft_type": "IA3", "r": 4, "lora_alpha": 8})", "cfg");
            }).find("peft_type is 'IA3'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_peft_config(
                  R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["lm_head"]})",
                  "cfg");
            }).find("'lm_head', which kiln's LoRA does not adapt"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_peft_config(R"({"peft_type": "LORA", "r": 0})", "cfg"); })
                .find("\"r\" must be a positive integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_peft_config("not json", "cfg"); }).find("cfg: not JSON"),
            std::string::npos);
  test::TempDir dir;
  EXPECT_NE(
      error_of([&] { read_peft_adapter(dir / "nothing"); }).find("has no adapter_config.json"),
      std::string::npos);
}

}  // namespace
}  // namespace kiln::train
