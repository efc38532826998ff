#include "kiln/models/hf_dir.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/io/json_brief.h"
#include "kiln/models/hf_config.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kProjections[3] = {"gate_proj", "up_proj", "down_proj"};

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  KILN_CHECK(f.good(), "cannot open '", p.string(), "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The index's weight_map: tensor name -> shard file name (a plain file name
// inside the directory; anything else could read outside it).
std::map<std::string, std::string> read_weight_map(const fs::path& index) {
  const std::string where = index.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(index));
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": not valid JSON: ", e.what());
  }
  KILN_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), where,
             ": needs a \"weight_map\" object mapping tensor names to shard files");
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    KILN_CHECK(file.is_string(), where, ": weight_map entry '", name, "' must name a file, got ",
               json_brief(file));
    std::string f = file.get<std::string>();
    KILN_CHECK(!f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
                   f.find('\\') == std::string::npos,
               where, ": weight_map entry '", name, "' names '", f,
               "', which is not a file name inside the model directory");
    map[name] = f;
  }
  KILN_CHECK(!map.empty(), where, ": weight_map is empty");
  return map;
}

// "model.layers.3.mlp.experts.17.up_proj.weight" -> prefix, expert, projection.
struct ExpertKey {
  std::string prefix;  // "model.layers.3.mlp.experts"
  int64_t expert = 0;
  int projection = 0;  // index into kProjections
};
std::optional<ExpertKey> parse_expert_key(const std::string& name) {
  static const std::regex re(
      R"(^(.*\.experts)\.([0-9]{1,9})\.(gate_proj|up_proj|down_proj)\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return std::nullopt;
  ExpertKey k{m[1].str(), std::stoll(m[2].str()), 0};
  while (m[3].str() != kProjections[k.projection]) ++k.projection;
  return k;
}

std::string expert_name(const std::string& prefix, int64_t e, int projection) {
  return cat(prefix, ".", e, ".", kProjections[projection], ".weight");
}

}  // namespace

nn::StateDict read_hf_weights(const std::string& dir) {
  fs::path d(dir);
  KILN_CHECK(fs::is_directory(d), "model directory '", dir,
             "' does not exist or is not a directory");
  nn::StateDict out;
  if (fs::exists(d / kSingleFile)) {
    SafetensorsFile f((d / kSingleFile).string());
    for (const SafetensorsEntry& e : f.entries()) out[e.name] = f.get(e.name);
    return out;
  }
  KILN_CHECK(fs::exists(d / kIndexFile), "model directory '", dir, "' has neither ", kSingleFile,
             " nor ", kIndexFile, " (kiln reads safetensors weights only)");
  std::map<std::string, std::string> weight_map = read_weight_map(d / kIndexFile);
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards;
  for (const auto& [name, file] : weight_map) {
    auto& shard = shards[file];
    if (!shard) {
      KILN_CHECK(fs::exists(d / file), (d / kIndexFile).string(), ": tensor '", name,
                 "' is in shard '", file, "', which is missing from the directory");
      shard = std::make_unique<SafetensorsFile>((d / file).string());
    }
    KILN_CHECK(shard->has(name), (d / kIndexFile).string(), " puts tensor '", name, "' in '", file,
               "', which does not hold it");
    out[name] = shard->get(name);
  }
  return out;
}

nn::StateDict hf_to_kiln_state_dict(nn::StateDict hf, const ModelConfig& config, DType dtype) {
  for (auto& [name, t] : hf) {
    KILN_CHECK(is_floating(t.dtype()), "weight '", name, "' has dtype ", dtype_name(t.dtype()),
               "; model weights must be floating point");
    t = t.to(dtype);
  }
  if (config.tie_embeddings) hf.erase("lm_head.weight");  // the embedding is the head
  if (!config.is_moe()) return hf;  // per-expert names stay, reported as unexpected

  // Collect per-expert weights by layer; experts beyond n_experts stay as
  // they are (load_state_dict reports them as unexpected).
  std::map<std::string, std::map<int64_t, std::array<Tensor, 3>>> layers;
  for (auto it = hf.begin(); it != hf.end();) {
    auto k = parse_expert_key(it->first);
    if (!k || k->expert >= config.n_experts) {
      ++it;
      continue;
    }
    layers[k->prefix][k->expert][k->projection] = std::move(it->second);
    it = hf.erase(it);
  }
  const int64_t E = config.n_experts, I = config.moe_ffn_dim, D = config.dim;
  const Shape want[3] = {{I, D}, {I, D}, {D, I}};
  std::vector<std::string> problems;
  for (auto& [prefix, experts] : layers) {
    std::vector<Tensor> gate_up, down;
    for (int64_t e = 0; e < E; ++e) {
      std::array<Tensor, 3>& w = experts[e];
      for (int p = 0; p < 3; ++p) {
        if (!w[p].defined())
          problems.push_back(cat(expert_name(prefix, e, p), ": missing"));
        else if (w[p].shape() != want[p])
          problems.push_back(
              cat(expert_name(prefix, e, p), ": expected ", want[p], ", got ", w[p].shape()));
      }
      if (!problems.empty()) continue;
      gate_up.push_back(concat({w[0], w[1]}, 0).unsqueeze(0));
      down.push_back(w[2].unsqueeze(0));
    }
    if (!problems.empty()) continue;
    hf[prefix + ".gate_up_proj"] = concat(gate_up, 0);
    hf[prefix + ".down_proj"] = concat(down, 0);
  }
  if (!problems.empty()) {
    std::string list;
    for (size_t i = 0; i < problems.size() && i < 8; ++i) list += cat("\n    ", problems[i]);
    if (problems.size() > 8) list += cat("\n    ... and ", problems.size() - 8, " more");
    fail("the MoE expert weights do not fit the model (", E, " experts of [", I, ", ", D,
         "] gate/up and [", D, ", ", I, "] down weights per layer):", list);
  }
  // A routing bias (auxiliary-loss-free balancing) the folder lacks starts
  // at zero: Hugging Face's Qwen3-MoE has none.
  if (config.router_bias_update_rate > 0)
    for (int64_t l = 0; l < config.n_layers; ++l)
      if (config.is_moe_layer(l))
        hf.try_emplace(cat("model.layers.", l, ".mlp.gate.e_score_correction_bias"),
                       zeros({E}, dtype));
  return hf;
}

NamedTensors kiln_to_hf_tensors(const CausalLM& model) {
  NamedTensors out;
  const std::string gate_up = ".experts.gate_up_proj", down = ".experts.down_proj";
  for (const auto& [name, t] : model.named_parameters()) {
    if (name.ends_with(gate_up)) {
      std::string prefix = name.substr(0, name.size() - gate_up.size()) + ".experts";
      const int64_t I = t->dim(1) / 2;
      for (int64_t e = 0; e < t->dim(0); ++e) {
        Tensor w = t->select(0, e);
        out.emplace_back(expert_name(prefix, e, 0), w.slice(0, 0, I));
        out.emplace_back(expert_name(prefix, e, 1), w.slice(0, I, 2 * I));
      }
    } else if (name.ends_with(down)) {
      std::string prefix = name.substr(0, name.size() - down.size()) + ".experts";
      for (int64_t e = 0; e < t->dim(0); ++e)
        out.emplace_back(expert_name(prefix, e, 2), t->select(0, e));
    } else {
      out.emplace_back(name, *t);
    }
  }
  return out;
}

void load_hf_weights(CausalLM& model, const std::string& dir) {
  DType dtype = model.model.embed_tokens.weight.dtype();
  try {
    model.load_state_dict(hf_to_kiln_state_dict(read_hf_weights(dir), model.config(), dtype));
  } catch (const Error& e) {
    fail("cannot load the weights of '", dir, "' into a ", hf_architecture(model.config()), " (",
         model.config().name, "): ", e.what());
  }
}

std::unique_ptr<CausalLM> load_hf_model(const std::string& dir, DType dtype) {
  HfConfig config = read_hf_config((fs::path(dir) / "config.json").string());
  auto model = std::make_unique<CausalLM>(config.model, dtype);
  load_hf_weights(*model, dir);
  return model;
}

void save_hf_model(const CausalLM& model, const std::string& dir, const HfSaveOptions& options) {
  KILN_CHECK(options.max_shard_bytes > 0, "save_hf_model: max_shard_bytes must be positive");
  KILN_CHECK(options.overwrite || !fs::exists(dir), "save_hf_model: '", dir,
             "' already exists; remove it or set overwrite to replace it");
  KILN_CHECK(model.config().router_bias_update_rate == 0, "save_hf_model: the model routes with "
             "a per-expert bias (model.router_bias_update_rate = ",
             model.config().router_bias_update_rate, "), which Hugging Face's ",
             hf_architecture(model.config()), " does not have: its outputs would differ from "
             "this model's; train without the routing bias to export");
  DType dtype = model.model.embed_tokens.weight.dtype();
  std::string config = hf_config_json(model.config(), dtype);

  // Greedy sharding in parameter order.
  std::vector<NamedTensors> shards;
  uint64_t filled = 0, total = 0;
  for (auto& named : kiln_to_hf_tensors(model)) {
    uint64_t n = uint64_t(named.second.numel()) * itemsize(named.second.dtype());
    if (shards.empty() || (filled > 0 && filled + n > options.max_shard_bytes)) {
      shards.emplace_back();
      filled = 0;
    }
    shards.back().push_back(std::move(named));
    filled += n;
    total += n;
  }

  std::error_code ec;
  fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  KILN_CHECK(!ec, "save_hf_model: cannot create '", parent.string(), "': ", ec.message());
  AtomicDir out(dir);
  const fs::path tmp(out.temp_path());
  write_file_atomic((tmp / "config.json").string(), config);
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards.size() == 1) {
    save_safetensors((tmp / kSingleFile).string(), shards[0], metadata);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      char file[64];
      std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      save_safetensors((tmp / file).string(), shards[i], metadata);
      for (const auto& [name, t] : shards[i]) weight_map[name] = file;
    }
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic((tmp / kIndexFile).string(), index.dump(2) + "\n");
  }
  out.commit();
}

}  // namespace kiln
