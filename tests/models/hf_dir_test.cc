// Model directories: kiln saves and loads its own (single file and sharded,
// MoE experts in the hub layout), and every defect of a directory — missing,
// unexpected or mis-shaped tensors, broken shards or index — is one clear
// error naming the directory and the tensors.
#include "kiln/models/hf_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/models/hf_config.h"
#include "tests/support/model_configs.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::TempDir;

template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error was raised";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

void expect_same_parameters(const CausalLM& a, const CausalLM& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_EQ(pa[i].second->to_vector<double>(), pb[i].second->to_vector<double>()) << pa[i].first;
  }
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

TEST(HfDir, SavesAndLoadsOneFile) {
  TempDir tmp;
  auto model = build_model(model_config("qwen3_debug"), DType::f32, 3);
  save_hf_model(*model, tmp / "m");
  EXPECT_TRUE(fs::exists(tmp / "m/config.json"));
  EXPECT_TRUE(fs::exists(tmp / "m/model.safetensors"));
  EXPECT_FALSE(fs::exists(tmp / "m/model.safetensors.index.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp / ""), fs::directory_iterator()), 1)
      << "no temporary directory is left";

  SafetensorsFile f(tmp / "m/model.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");  // transformers requires it
  EXPECT_FALSE(f.has("lm_head.weight"));       // tied
  test::expect_same_architecture(read_hf_config(tmp / "m/config.json").model,
                                 model_config("qwen3_debug"));

  auto back = load_hf_model(tmp / "m");
  expect_same_parameters(*model, *back);
}

TEST(HfDir, ShardsMoEExpertsInTheHubLayout) {
  TempDir tmp;
  const ModelConfig& c = model_config("qwen3_moe_debug");
  auto model = build_model(c, DType::f32, 4);
  HfSaveOptions o;
  o.max_shard_bytes = 150'000;
  save_hf_model(*model, tmp / "m", o);

  json index = read_json(tmp / "m/model.safetensors.index.json");
  const json& map = index["weight_map"];
  std::set<std::string> files;
  uint64_t total = 0;
  for (const auto& [name, file] : map.items()) {
    files.insert(file.get<std::string>());
    EXPECT_EQ(name.find("gate_up_proj"), std::string::npos) << "stacked name on disk: " << name;
    SafetensorsFile shard(tmp / ("m/" + file.get<std::string>()));
    const SafetensorsEntry& e = shard.entry(name);
    total += e.nbytes();
    EXPECT_LE(e.nbytes(), 2048u * 64 * 4) << name;
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(total, uint64_t(param_count(c)) * 4);
  EXPECT_GT(files.size(), 2u);
  for (const std::string& f : files) {
    EXPECT_TRUE(fs::exists(tmp / ("m/" + f))) << f;
    EXPECT_LE(fs::file_size(tmp / ("m/" + f)), 150'000u + 2048u * 64 * 4) << f;
  }
  // Expert e's gate and up rows are rows [0, I) and [I, 2I) of gate_up_proj[e].
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
    EXPECT_TRUE(map.contains(cat("model.layers.1.mlp.experts.7.", proj, ".weight"))) << proj;
  nn::StateDict disk = read_hf_weights(tmp / "m");
  const Tensor& gate_up = model->model.layers[1].moe->experts.gate_up_proj;
  EXPECT_EQ(disk["model.layers.1.mlp.experts.7.up_proj.weight"].to_vector<float>(),
            gate_up.select(0, 7).slice(0, 32, 64).contiguous().to_vector<float>());
  EXPECT_EQ(disk["model.layers.1.mlp.experts.7.down_proj.weight"].shape(), Shape({64, 32}));

  expect_same_parameters(*model, *load_hf_model(tmp / "m"));
}

// The hub's Qwen3-MoE has no routing bias: a folder loads into a model
// with one as zeros, and such a model is not exported.
TEST(HfDir, RoutingBiasesStartAtZeroAndAreNotExported) {
  TempDir tmp;
  ModelConfig c = model_config("qwen3_moe_debug");
  auto plain = build_model(c, DType::f32, 4);
  save_hf_model(*plain, tmp / "m");
  c.router_bias_update_rate = 0.001;
  CausalLM biased(c);
  load_hf_weights(biased, tmp / "m");
  for (size_t l = 0; l < biased.model.layers.size(); ++l) {
    const Tensor& b = biased.model.layers[l].moe->gate.e_score_correction_bias;
    EXPECT_EQ(b.to_vector<float>(), std::vector<float>(size_t(c.n_experts), 0.0f)) << l;
    EXPECT_EQ(biased.model.layers[l].moe->gate.weight.to_vector<float>(),
              plain->model.layers[l].moe->gate.weight.to_vector<float>());
  }
  EXPECT_EQ(biased.num_parameters(), param_count(c));
  expect_error([&] { save_hf_model(biased, tmp / "biased"); },
               {"routes with a per-expert bias", "Qwen3MoeForCausalLM"});
  EXPECT_FALSE(fs::exists(tmp / "biased"));
}

TEST(HfDir, ConvertsDtypes) {
  TempDir tmp;
  auto bf = build_model(model_config("llama3_debug"), DType::bf16, 5);
  save_hf_model(*bf, tmp / "m");
  EXPECT_EQ(read_hf_config(tmp / "m/config.json").dtype, DType::bf16);
  EXPECT_EQ(SafetensorsFile(tmp / "m/model.safetensors").entry("lm_head.weight").dtype,
            DType::bf16);
  auto f32 = load_hf_model(tmp / "m", DType::f32);
  EXPECT_EQ(f32->lm_head->weight.dtype(), DType::f32);
  EXPECT_EQ(f32->lm_head->weight.to_vector<double>(), bf->lm_head->weight.to_vector<double>());
}

TEST(HfDir, OverwritesOnlyWhenAsked) {
  TempDir tmp;
  auto a = build_model(model_config("llama3_debug"), DType::f32, 6);
  auto b = build_model(model_config("llama3_debug"), DType::f32, 7);
  save_hf_model(*a, tmp / "m");
  write_file_atomic(tmp / "m/tokenizer.json", "{}");
  expect_error([&] { save_hf_model(*b, tmp / "m"); }, {"already exists", "overwrite"});
  HfSaveOptions o;
  o.overwrite = true;
  save_hf_model(*b, tmp / "m", o);
  expect_same_parameters(*b, *load_hf_model(tmp / "m"));
  EXPECT_FALSE(fs::exists(tmp / "m/tokenizer.json"));  // replaced whole, as documented
  save_hf_model(*a, tmp / "new/parents/m");
  EXPECT_TRUE(fs::exists(tmp / "new/parents/m/config.json"));
}

// A directory holding `config`'s config.json and `tensors` as model.safetensors.
void write_dir(const std::string& dir, const ModelConfig& config, const NamedTensors& tensors) {
  fs::create_directories(dir);
  write_file_atomic(dir + "/config.json", hf_config_json(config));
  save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

NamedTensors hub_tensors(const ModelConfig& c, uint64_t seed) {
  return kiln_to_hf_tensors(*build_model(c, DType::f32, seed));
}

NamedTensors without(NamedTensors t, const std::string& name) {
  std::erase_if(t, [&](const auto& p) { return p.first == name; });
  return t;
}

NamedTensors replaced(NamedTensors t, const std::string& name, Tensor value) {
  for (auto& p : t)
    if (p.first == name) p.second = value;
  return t;
}

TEST(HfDir, MissingUnexpectedAndMisShapedTensors) {
  TempDir tmp;
  const ModelConfig& c = model_config("llama3_debug");
  NamedTensors good = hub_tensors(c, 8);

  write_dir(tmp / "missing", c, without(good, "model.layers.1.mlp.up_proj.weight"));
  expect_error([&] { load_hf_model(tmp / "missing"); },
               {tmp / "missing", "1 missing", "model.layers.1.mlp.up_proj.weight"});

  NamedTensors extra = good;
  extra.emplace_back("model.layers.0.mlp.extra.weight", zeros({2}));
  write_dir(tmp / "unexpected", c, extra);
  expect_error([&] { load_hf_model(tmp / "unexpected"); },
               {tmp / "unexpected", "1 unexpected", "model.layers.0.mlp.extra.weight"});

  write_dir(tmp / "shape", c, replaced(good, "model.embed_tokens.weight", zeros({2048, 32})));
  expect_error(
      [&] { load_hf_model(tmp / "shape"); },
      {tmp / "shape", "wrong shape", "model.embed_tokens.weight", "[2048,64]", "[2048,32]"});

  write_dir(tmp / "int", c, replaced(good, "model.norm.weight", zeros({64}, DType::i32)));
  expect_error([&] { load_hf_model(tmp / "int"); }, {"model.norm.weight", "i32", "floating"});

  // A checkpoint of another architecture: every difference is listed at once.
  auto qwen = build_model(model_config("qwen3_debug"), DType::f32, 9);
  save_hf_model(*qwen, tmp / "qwen");
  auto llama = build_model(c, DType::f32, 9);
  expect_error(
      [&] { load_hf_weights(*llama, tmp / "qwen"); },
      {tmp / "qwen", "LlamaForCausalLM", "wrong shape", "missing", "unexpected", "q_norm"});

  // A tied model ignores a redundant lm_head.weight (older saves include it).
  const ModelConfig& q = model_config("qwen3_debug");
  NamedTensors tied = hub_tensors(q, 10);
  tied.emplace_back("lm_head.weight", zeros({2048, 64}));
  write_dir(tmp / "tied", q, tied);
  EXPECT_NO_THROW(load_hf_model(tmp / "tied"));
}

TEST(HfDir, MoEExpertProblems) {
  TempDir tmp;
  const ModelConfig& c = model_config("qwen3_moe_debug");
  NamedTensors good = hub_tensors(c, 11);

  write_dir(tmp / "missing", c, without(good, "model.layers.0.mlp.experts.3.up_proj.weight"));
  expect_error([&] { load_hf_model(tmp / "missing"); },
               {tmp / "missing", "model.layers.0.mlp.experts.3.up_proj.weight: missing"});

  write_dir(tmp / "shape", c,
            replaced(good, "model.layers.1.mlp.experts.5.down_proj.weight", zeros({32, 64})));
  expect_error([&] { load_hf_model(tmp / "shape"); },
               {"model.layers.1.mlp.experts.5.down_proj.weight: expected [64,32], got [32,64]"});

  NamedTensors extra = good;
  extra.emplace_back("model.layers.0.mlp.experts.8.gate_proj.weight", zeros({32, 64}));
  write_dir(tmp / "extra", c, extra);
  expect_error([&] { load_hf_model(tmp / "extra"); },
               {"unexpected", "model.layers.0.mlp.experts.8.gate_proj.weight"});

  // transformers 5's stacked layout loads as it is.
  auto model = build_model(c, DType::f32, 12);
  NamedTensors stacked;
  for (const auto& [name, t] : model->named_parameters()) stacked.emplace_back(name, *t);
  write_dir(tmp / "stacked", c, stacked);
  expect_same_parameters(*model, *load_hf_model(tmp / "stacked"));
}

TEST(HfDir, BrokenDirectoriesAndShards) {
  TempDir tmp;
  const ModelConfig& c = model_config("llama3_debug");
  auto model = build_model(c, DType::f32, 13);
  HfSaveOptions o;
  o.max_shard_bytes = 200'000;
  save_hf_model(*model, tmp / "m", o);
  json index = read_json(tmp / "m/model.safetensors.index.json");
  auto write_index = [&](const json& j) {
    write_file_atomic(tmp / "m/model.safetensors.index.json", j.dump());
  };

  expect_error([&] { read_hf_weights(tmp / "none"); }, {tmp / "none", "not a directory"});
  fs::create_directories(tmp / "empty");
  expect_error([&] { read_hf_weights(tmp / "empty"); },
               {tmp / "empty", "neither model.safetensors nor model.safetensors.index.json"});

  json j = index;
  j["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  write_index(j);
  expect_error([&] { read_hf_weights(tmp / "m"); },
               {"model.safetensors.index.json", "model.norm.weight",
                "model-00009-of-00009.safetensors", "missing"});

  j = index;
  j["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  write_index(j);
  expect_error([&] { read_hf_weights(tmp / "m"); },
               {"'../elsewhere.safetensors'", "not a file name inside the model directory"});

  j = index;
  std::string norm_file = j["weight_map"]["model.norm.weight"];
  std::string other = norm_file == "model-00001-of-00004.safetensors"
                          ? "model-00002-of-00004.safetensors"
                          : "model-00001-of-00004.safetensors";
  j["weight_map"]["model.norm.weight"] = other;
  write_index(j);
  expect_error([&] { read_hf_weights(tmp / "m"); },
               {"tensor 'model.norm.weight'", other, "does not hold it"});

  write_file_atomic(tmp / "m/model.safetensors.index.json", "{\"weight_map\": ");
  expect_error([&] { read_hf_weights(tmp / "m"); },
               {"model.safetensors.index.json", "not valid JSON"});
  write_index({{"metadata", json::object()}});
  expect_error([&] { read_hf_weights(tmp / "m"); }, {"needs a \"weight_map\""});

  // A truncated shard: the safetensors error names the shard and tensor.
  write_index(index);
  std::string shard = tmp / ("m/" + norm_file);
  fs::resize_file(shard, fs::file_size(shard) - 3);
  expect_error([&] { load_hf_model(tmp / "m"); }, {shard, "truncated"});

  expect_error([&] { load_hf_model(tmp / "empty"); }, {"config.json"});
}

}  // namespace
}  // namespace kiln
