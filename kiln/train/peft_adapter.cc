#include "kiln/train/peft_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/train/checkpoint.h"

namespace fs = std::filesystem;

namespace kiln::train {
namespace {

const std::string kPrefix = "base_model.model.";

std::string target_from_module(const std::string& module, const std::string& where) {
  for (const std::string& t : lora_target_names())
    if (lora_module_name(t) == module) return t;
  fail(where, ": target_modules names '", module, "', which kiln's LoRA does not adapt (",
       "it adapts q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
}

}  // namespace

PeftAdapter run_adapter(const TrainConfig& config, nn::StateDict adapters) {
  const std::string& base = config.checkpoint.initial_load_path;
  return {lora_options(config), base.empty() ? "" : fs::absolute(base).string(),
          std::move(adapters)};
}

std::string peft_config_json(const PeftAdapter& adapter) {
  nlohmann::json modules = nlohmann::json::array();
  for (const std::string& t : adapter.options.targets) modules.push_back(lora_module_name(t));
  nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", adapter.base_model},
      {"r", adapter.options.rank},
      {"lora_alpha", adapter.options.alpha},
      {"lora_dropout", 0.0},
      {"target_modules", modules},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"use_rslora", false},
      {"use_dora", false},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"modules_to_save", nullptr},
  };
  return config.dump(2) + "\n";
}

void save_peft_adapter(const PeftAdapter& adapter, const std::string& dir, DType dtype,
                       const std::string& tokenizer_path) {
  NamedTensors tensors;
  for (const auto& [name, t] : adapter.adapters)
    tensors.emplace_back(kPrefix + name, t.dtype() == dtype ? t : t.to(dtype));
  if (const fs::path parent = fs::path(dir).parent_path(); !parent.empty())
    fs::create_directories(parent);
  AtomicDir out(dir);
  const fs::path tmp = out.temp_path();
  write_file_atomic((tmp / "adapter_config.json").string(), peft_config_json(adapter));
  save_safetensors((tmp / "adapter_model.safetensors").string(), tensors,
                   {{"format", "pt"}});
  if (!tokenizer_path.empty()) copy_tokenizer_files(tokenizer_path, tmp.string());
  out.commit();
}

PeftAdapter parse_peft_config(std::string_view text, const std::string& where) {
  nlohmann::json c = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  KILN_CHECK(!c.is_discarded(), where, ": not JSON");
  KILN_CHECK(c.is_object(), where, ": not a JSON object");
  auto str = [&](const char* key, const std::string& fallback) {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    KILN_CHECK(c[key].is_string(), where, ": \"", key, "\" must be a string");
    return c[key].get<std::string>();
  };
  auto flag = [&](const char* key) {
    if (!c.contains(key) || c[key].is_null()) return false;
    KILN_CHECK(c[key].is_boolean(), where, ": \"", key, "\" must be true or false");
    return c[key].get<bool>();
  };
  auto empty_or_null = [&](const char* key) {
    return !c.contains(key) || c[key].is_null() || c[key].empty();
  };
  KILN_CHECK(str("peft_type", "") == "LORA", where, ": peft_type is '", str("peft_type", ""),
             "'; kiln reads LORA adapters");
  KILN_CHECK(str("bias", "none") == "none", where, ": bias = '", str("bias", ""),
             "' trains biases too; kiln's LoRA reads bias = none");
  for (const char* key : {"use_dora", "use_rslora", "fan_in_fan_out"})
    KILN_CHECK(!flag(key), where, ": \"", key, "\" is true, which kiln's LoRA does not do");
  for (const char* key :
       {"modules_to_save", "rank_pattern", "alpha_pattern", "layers_to_transform"})
    KILN_CHECK(empty_or_null(key), where, ": \"", key, "\" is set, which kiln's LoRA does not do");
  KILN_CHECK(c.contains("r") && c["r"].is_number_integer() && c["r"].get<int64_t>() >= 1, where,
             ": \"r\" must be a positive integer");
  KILN_CHECK(c.contains("lora_alpha") && c["lora_alpha"].is_number() &&
                 std::isfinite(c["lora_alpha"].get<double>()) && c["lora_alpha"].get<double>() > 0,
             where, ": \"lora_alpha\" must be a positive number");
  PeftAdapter out;
  out.options.rank = c["r"].get<int64_t>();
  out.options.alpha = c["lora_alpha"].get<double>();
  out.base_model = str("base_model_name_or_path", "");
  KILN_CHECK(c.contains("target_modules") && c["target_modules"].is_array() &&
                 !c["target_modules"].empty(),
             where, ": \"target_modules\" must be a non-empty list of module names");
  for (const auto& m : c["target_modules"]) {
    KILN_CHECK(m.is_string(), where, ": \"target_modules\" must be a list of module names");
    std::string t = target_from_module(m.get<std::string>(), where);
    KILN_CHECK(std::find(out.options.targets.begin(), out.options.targets.end(), t) ==
                   out.options.targets.end(),
               where, ": \"target_modules\" lists '", m.get<std::string>(), "' twice");
    out.options.targets.push_back(std::move(t));
  }
  return out;
}

PeftAdapter read_peft_adapter(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / "adapter_config.json";
  std::ifstream f(config_path, std::ios::binary);
  KILN_CHECK(f.good(), "'", dir, "' is not a PEFT adapter folder: it has no adapter_config.json");
  PeftAdapter out = parse_peft_config(std::string(std::istreambuf_iterator<char>(f), {}),
                                      config_path.string());
  const std::string weights = (fs::path(dir) / "adapter_model.safetensors").string();
  std::error_code ec;
  KILN_CHECK(fs::is_regular_file(weights, ec), "'", dir,
             "' has no adapter_model.safetensors beside its adapter_config.json");
  SafetensorsFile file(weights);
  for (const std::string& name : file.names()) {
    KILN_CHECK(name.starts_with(kPrefix) && is_lora_parameter(name), weights, ": tensor '", name,
               "' is not a LoRA weight (base_model.model.<module>.lora_A.weight or lora_B.weight)");
    out.adapters[name.substr(kPrefix.size())] = file.get(name).to(DType::f32);
  }
  return out;
}

}  // namespace kiln::train
