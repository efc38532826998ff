// The ModelConfig fields a recipe or flag may change, declared once: the
// trainer's [model] keys (parsing, errors, --print-config, --override) and
// ModelConfig::validate's per-field checks all read this table, so a new
// overridable field is one line here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/models/config.h"
#include "kiln/nn/component_registry.h"

namespace kiln {

using ModelMember = std::variant<int64_t ModelConfig::*, double ModelConfig::*, bool ModelConfig::*,
                                 std::string ModelConfig::*>;

struct ModelField {
  enum class Range { any, positive, non_negative };
  const char* key;  // the member's name, and the config key model.<key>
  ModelMember member;
  const char* help;
  Range range = Range::any;  // of a number
  // A component implementation: the registry its value must name (and the
  // component `--override <component>=<impl>` sets). Null otherwise.
  const nn::ComponentRegistryBase* registry = nullptr;
  // How the model trains, with no Hugging Face config.json key (the router's
  // z-loss and balancing-bias rate): a fine-tune takes the recipe's.
  bool training = false;
};

const std::vector<ModelField>& model_fields();

// kiln::Error naming `f.key` when c's value breaks f's range or registry.
void check_model_field(const ModelField& f, const ModelConfig& c);

// Changes to a registered config, one optional per model_fields() entry
// (in its order): what a recipe's [model] section holds.
class ModelChanges {
 public:
  using Value = std::variant<std::optional<int64_t>, std::optional<double>, std::optional<bool>,
                             std::optional<std::string>>;
  ModelChanges();  // every field unset

  std::vector<Value>& values() { return values_; }
  template <class T>
  const std::optional<T>& get(std::string_view key) const {
    return std::get<std::optional<T>>(values_[index(key)]);
  }
  bool all_set() const;
  // Sets each unset value to `base`'s.
  void fill_from(const ModelConfig& base);
  // `base` with every set value applied.
  ModelConfig applied_to(ModelConfig base) const;

 private:
  size_t index(std::string_view key) const;
  std::vector<Value> values_;
};

}  // namespace kiln
