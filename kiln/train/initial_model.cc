#include "kiln/train/initial_model.h"

#include <filesystem>
#include <string_view>
#include <variant>

#include "kiln/base/error.h"
#include "kiln/models/hf_config.h"
#include "kiln/models/model_fields.h"

namespace kiln::train {

namespace {

bool is_architecture(const ModelField& f) { return !f.registry && !f.training; }

// The folder's config.json, or "" when it has none.
std::string config_json(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) ? path : "";
}

}  // namespace

ModelConfig initial_folder_model(const std::string& dir, const ModelConfig& recipe) {
  const std::string path = config_json(dir);
  KILN_CHECK(!path.empty(), "checkpoint.initial_load_path '", dir,
             "' has no config.json: it must be a Hugging Face model folder");
  return with_recipe_components(read_hf_config(path).model, recipe, path);
}

ModelConfig with_folder_architecture(ModelConfig registered, const std::string& dir) {
  const std::string path = config_json(dir);
  if (path.empty()) return registered;
  const ModelConfig folder = read_hf_config(path).model;
  for (const ModelField& f : model_fields())
    if (is_architecture(f))
      std::visit([&](auto member) { registered.*member = folder.*member; }, f.member);
  return registered;
}

ModelConfig with_recipe_components(ModelConfig m, const ModelConfig& recipe,
                                   const std::string& source) {
  for (const ModelField& f : model_fields()) {
    std::visit(
        [&](auto member) {
          if (!is_architecture(f)) {
            m.*member = recipe.*member;
            return;
          }
          // The init of weights that are loaded anyway.
          if (std::string_view(f.key) == "init_std") return;
          KILN_CHECK(m.*member == recipe.*member, "checkpoint.initial_load_path: ", source, " has ",
                     f.key, " = ", m.*member, " but the recipe sets model.", f.key, " = ",
                     recipe.*member, ": the folder holds another model; leave model.", f.key,
                     " unset to train the folder's");
        },
        f.member);
  }
  return m;
}

}  // namespace kiln::train
