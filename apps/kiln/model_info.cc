// `kiln info --model NAME [--json]`: a registered model's architecture, its
// parameter count and training FLOPs per token, computed from the config
// alone. The JSON form carries every hyper-parameter another tool needs to
// build the same architecture.
#include <iomanip>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "apps/kiln/commands.h"
#include "kiln/models/config.h"

namespace kiln::cli {
namespace {

nlohmann::ordered_json to_json(const ModelConfig& c, int64_t seq_len) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["family"] = c.family;
  j["params"] = param_count(c);
  j["active_params"] = active_param_count(c);
  j["flops_per_token"] = flops_per_token(c, seq_len);
  j["seq_len"] = seq_len;
  j["dim"] = c.dim;
  j["n_layers"] = c.n_layers;
  j["n_heads"] = c.n_heads;
  j["n_kv_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["ffn_dim"] = c.ffn_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling->factor},
                         {"low_freq_factor", c.rope_scaling->low_freq_factor},
                         {"high_freq_factor", c.rope_scaling->high_freq_factor},
                         {"original_max_position_embeddings",
                          c.rope_scaling->original_max_position_embeddings}};
  else
    j["rope_scaling"] = nullptr;
  j["norm_eps"] = c.norm_eps;
  j["tie_embeddings"] = c.tie_embeddings;
  j["qk_norm"] = c.qk_norm;
  j["attention_bias"] = c.attention_bias;
  if (c.is_moe()) {
    j["n_experts"] = c.n_experts;
    j["top_k"] = c.top_k;
    j["moe_ffn_dim"] = c.moe_ffn_dim;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  }
  j["init_std"] = c.init_std;
  return j;
}

}  // namespace

std::string human_count(double n) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (n >= 1000 && u < 4) n /= 1000, ++u;
  std::ostringstream os;
  os << std::fixed << std::setprecision(u == 0 ? 0 : 2) << n << units[u];
  return os.str();
}

void print_model_info(const std::string& name, int64_t seq_len, bool json) {
  const ModelConfig& c = model_config(name);
  if (seq_len <= 0) seq_len = c.seq_len;
  nlohmann::ordered_json j = to_json(c, seq_len);
  if (json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << c.name << " (" << c.family << "): " << human_count(double(param_count(c)))
            << " parameters (" << param_count(c) << ")";
  if (c.is_moe())
    std::cout << ", " << human_count(double(active_param_count(c))) << " active per token";
  std::cout << "\n  training FLOPs per token at seq_len " << seq_len << ": "
            << human_count(flops_per_token(c, seq_len)) << " (6N + attention)\n";
  for (auto& [key, value] : j.items())
    if (key != "name" && key != "family" && key != "params" && key != "active_params" &&
        key != "flops_per_token")
      std::cout << "  " << key << ": " << value.dump() << "\n";
}

}  // namespace kiln::cli
