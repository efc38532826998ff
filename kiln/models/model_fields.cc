#include "kiln/models/model_fields.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/moe.h"

namespace kiln {
namespace {

// T for a `T ModelConfig::*`.
template <class M>
struct MemberType;
template <class T>
struct MemberType<T ModelConfig::*> {
  using type = T;
};
template <class M>
using member_t = typename MemberType<M>::type;

}  // namespace

const std::vector<ModelField>& model_fields() {
  using C = ModelConfig;
  using R = ModelField::Range;
  static const std::vector<ModelField> fields = {
      {"dim", &C::dim, "hidden size (HF hidden_size)", R::positive},
      {"n_layers", &C::n_layers, "decoder layers (num_hidden_layers)", R::positive},
      {"n_heads", &C::n_heads, "query heads (num_attention_heads)", R::positive},
      {"n_kv_heads", &C::n_kv_heads, "key/value heads, GQA when fewer (num_key_value_heads)",
       R::positive},
      {"head_dim", &C::head_dim, "width of a head, even for rotary (head_dim)", R::positive},
      {"ffn_dim", &C::ffn_dim, "width of the dense SwiGLU MLP (intermediate_size)",
       R::non_negative},
      {"vocab_size", &C::vocab_size, "vocabulary size (vocab_size)", R::positive},
      {"n_experts", &C::n_experts, "MoE experts per layer, 0 for dense (num_experts)",
       R::non_negative},
      {"top_k", &C::top_k, "experts each token uses (num_experts_per_tok)", R::non_negative},
      {"moe_ffn_dim", &C::moe_ffn_dim, "width of each expert (moe_intermediate_size)",
       R::non_negative},
      {"router_z_loss_coef", &C::router_z_loss_coef,
       "weight of the router z-loss (ST-MoE: mean squared logsumexp of the router logits), 0: off",
       R::non_negative, nullptr, true},
      {"router_bias_update_rate", &C::router_bias_update_rate,
       "auxiliary-loss-free balancing (DeepSeek-V3): the step of each expert's routing bias, 0: off",
       R::non_negative, nullptr, true},
      {"rope_theta", &C::rope_theta, "rotary base (rope_theta)", R::positive},
      {"norm_eps", &C::norm_eps, "RMSNorm epsilon (rms_norm_eps)", R::positive},
      {"init_std", &C::init_std, "std of the normal weight init (initializer_range)",
       R::non_negative},
      {"tie_embeddings", &C::tie_embeddings, "LM head shares the embedding (tie_word_embeddings)"},
      {"qk_norm", &C::qk_norm, "RMSNorm of each q and k head (Qwen3)"},
      {"attention_impl", &C::attention_impl, "attention of the projected heads", R::any,
       &nn::attention_impls()},
      {"loss_impl", &C::loss_impl, "LM head and cross-entropy", R::any, &nn::loss_impls()},
      {"moe_impl", &C::moe_impl, "how the MoE experts run", R::any, &nn::moe_impls()},
      {"norm_impl", &C::norm_impl, "every RMSNorm of the model", R::any, &nn::norm_impls()},
  };
  return fields;
}

void check_model_field(const ModelField& f, const ModelConfig& c) {
  auto where = [&] { return cat("model config '", c.name, "': "); };
  std::visit(
      [&](auto member) {
        using T = member_t<decltype(member)>;
        const T& v = c.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          if (f.registry) f.registry->check(v, cat(where(), f.key));
        } else if constexpr (!std::is_same_v<T, bool>) {
          KILN_CHECK(f.range != ModelField::Range::positive || v > 0, where(), f.key,
                     " must be positive, got ", v);
          KILN_CHECK(f.range != ModelField::Range::non_negative || v >= 0, where(), f.key,
                     " must be non-negative, got ", v);
        }
      },
      f.member);
}

ModelChanges::ModelChanges() {
  for (const ModelField& f : model_fields())
    std::visit(
        [&](auto member) { values_.emplace_back(std::optional<member_t<decltype(member)>>()); },
        f.member);
}

bool ModelChanges::all_set() const {
  return std::all_of(values_.begin(), values_.end(), [](const Value& value) {
    return std::visit([](const auto& v) { return v.has_value(); }, value);
  });
}

void ModelChanges::fill_from(const ModelConfig& base) {
  const auto& fields = model_fields();
  for (size_t i = 0; i < fields.size(); ++i)
    std::visit(
        [&](auto member) {
          auto& v = std::get<std::optional<member_t<decltype(member)>>>(values_[i]);
          if (!v) v = base.*member;
        },
        fields[i].member);
}

ModelConfig ModelChanges::applied_to(ModelConfig c) const {
  const auto& fields = model_fields();
  for (size_t i = 0; i < fields.size(); ++i)
    std::visit(
        [&](auto member) {
          using T = member_t<decltype(member)>;
          if (const auto& v = std::get<std::optional<T>>(values_[i])) c.*member = *v;
        },
        fields[i].member);
  return c;
}

size_t ModelChanges::index(std::string_view key) const {
  const auto& fields = model_fields();
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].key == key) return i;
  fail("no overridable model field '", key, "'");
}

}  // namespace kiln
