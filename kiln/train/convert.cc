#include "kiln/train/convert.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/models/hf_config.h"
#include "kiln/train/checkpoint.h"
#include "kiln/train/config.h"
#include "kiln/train/saved_run.h"

namespace fs = std::filesystem;

namespace kiln::train {
namespace {

bool has_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A registered model of the family: the recipe's model.name, whose fields
// the recipe then sets to the architecture's one by one.
std::string family_model_name(const ModelConfig& mc) {
  for (const std::string& name : model_config_names())
    if (model_config(name).family == mc.family) return name;
  fail("no registered model of family '", mc.family, "'");
}

// A recipe for the model `mc` (its [model] section sets every field), which
// load_checkpoint_model checks against the recorded architecture as it
// does a fine-tune's; `source` stands as its initial_load_path.
std::string recipe_for(const ModelConfig& mc, const std::string& source) {
  TrainConfig c;
  c.model.name = family_model_name(mc);
  c.model.changes.fill_from(mc);
  c.training.seq_len = mc.seq_len;
  c.checkpoint.initial_load_path = source;
  finalize(c);
  return to_toml(c);
}

// An HF folder's model as a checkpoint folder holding step-0 (no training
// step yet) and the tokenizer's files. The manifest records the
// architecture, with the eos ids of the folder's config.json and
// generation_config.json, so that the checkpoint stands without the folder.
void write_checkpoint(const SavedModel& m, const std::string& source, const std::string& dir,
                      DType dtype) {
  CheckpointData d;
  for (const auto& [name, t] : m.model->named_parameters()) d.model.emplace_back(name, *t);
  nlohmann::json architecture = nlohmann::json::parse(hf_config_json(m.model->config(), dtype));
  architecture["eos_token_id"] = m.eos_ids;
  d.config = {{"recipe", recipe_for(m.model->config(), source)}, {"model", architecture}};
  if (const fs::path parent = fs::path(dir).parent_path(); !parent.empty())
    fs::create_directories(parent);
  AtomicDir out(dir);
  CheckpointManager(out.temp_path()).save(d);
  copy_tokenizer_files(m.tokenizer_path, out.temp_path());
  out.commit();
}

std::optional<ModelFolder> folder_kind(const fs::path& d) {
  if (has_file(d / "config.json")) return ModelFolder::hugging_face;
  if (has_file(d / "adapter_config.json")) return ModelFolder::peft_adapter;
  if (has_file(d / "manifest.json") || has_file(d / "config.toml") ||
      CheckpointManager(d.string()).latest_step())
    return ModelFolder::checkpoint;
  return std::nullopt;
}

// --overwrite replaces only what convert writes: a folder that holds the
// source would take the source with it, and any other folder is someone's
// data.
void check_replaceable(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(to, ec)) return;
  KILN_CHECK(fs::is_directory(to, ec), "cannot convert to '", to,
             "': it exists and is not a folder");
  for (fs::path p = fs::absolute(from).parent_path(); p != p.parent_path(); p = p.parent_path())
    KILN_CHECK(!fs::equivalent(p, to, ec), "cannot convert '", from, "' to '", to,
               "': replacing it would delete the source, which is inside it");
  KILN_CHECK(fs::is_empty(to, ec) || folder_kind(to), "cannot convert to '", to, "': --overwrite "
             "replaces a Hugging Face, PEFT adapter or kiln checkpoint folder, or an empty one, "
             "and this is none of those");
}

}  // namespace

ModelFolder model_folder_kind(const std::string& dir) {
  std::error_code ec;
  KILN_CHECK(fs::exists(dir, ec), "cannot convert '", dir, "': it does not exist");
  KILN_CHECK(fs::is_directory(dir, ec), "cannot convert '", dir, "': it is not a folder");
  if (std::optional<ModelFolder> kind = folder_kind(dir)) return *kind;
  fail("cannot convert '", dir, "': it is neither a Hugging Face folder (it has no config.json) "
       "nor a PEFT adapter folder (adapter_config.json) nor a kiln checkpoint (a run's dump "
       "folder, its checkpoint folder or a step-N folder)");
}

Converted convert_model(const std::string& from, const std::string& to,
                        const ConvertOptions& options) {
  const ModelFolder kind = model_folder_kind(from);
  std::error_code ec;
  KILN_CHECK(!fs::equivalent(from, to, ec), "cannot convert '", from, "' into itself");
  KILN_CHECK(options.overwrite || !fs::exists(to, ec), "cannot convert to '", to,
             "': it already exists (--overwrite replaces it)");
  check_replaceable(from, to);
  KILN_CHECK(options.base.empty() || kind == ModelFolder::peft_adapter, "--base names the base "
             "model of a PEFT adapter folder, but '", from, "' is not one");
  switch (kind) {
    case ModelFolder::checkpoint: {
      auto saved = load_checkpoint_for_export(from, options.tokenizer_path, options.dtype,
                                              options.merge_lora);
      if (const SavedAdapter* a = std::get_if<SavedAdapter>(&saved)) {
        save_peft_adapter(a->adapter, to, options.dtype, a->tokenizer_path);
        return {kind, ModelFolder::peft_adapter, a->description};
      }
      const SavedModel& m = std::get<SavedModel>(saved);
      export_hf(*m.model, m.tokenizer_path, to, m.eos_ids);
      return {kind, ModelFolder::hugging_face, m.description};
    }
    case ModelFolder::peft_adapter: {
      KILN_CHECK(options.merge_lora, "'", from, "' is a PEFT adapter folder: --merge-lora "
                 "merges it into its base model as a Hugging Face folder");
      SavedModel m = load_peft_merged(from, options.base, options.tokenizer_path, options.dtype);
      export_hf(*m.model, m.tokenizer_path, to, m.eos_ids);
      return {kind, ModelFolder::hugging_face, m.description};
    }
    case ModelFolder::hugging_face: {
      KILN_CHECK(!options.merge_lora, "--merge-lora: '", from, "' is a whole model, not LoRA "
                 "adapters (a LoRA run's checkpoint or a PEFT folder)");
      SavedModel m = load_hf_model_dir(from, options.tokenizer_path, options.dtype);
      write_checkpoint(m, fs::absolute(from).string(), to, options.dtype);
      return {kind, ModelFolder::checkpoint, m.description};
    }
  }
  fail("convert: unknown folder kind");
}

}  // namespace kiln::train
