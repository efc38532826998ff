#include "kiln/train/saved_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"
#include "kiln/models/hf_config.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/lora.h"
#include "kiln/train/checkpoint.h"
#include "kiln/train/config.h"

namespace fs = std::filesystem;

namespace kiln::train {
namespace {

// "step-N" -> N.
std::optional<int64_t> step_of(const fs::path& dir) {
  std::string name = dir.filename().string();
  if (!name.starts_with("step-")) return std::nullopt;
  try {
    return std::stoll(name.substr(5));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

LoadedCheckpoint find_checkpoint(const fs::path& dir) {
  std::error_code ec;
  KILN_CHECK(fs::is_directory(dir, ec), "checkpoint '", dir.string(), "' is not a folder");
  if (auto step = step_of(dir); step && fs::is_regular_file(dir / "manifest.json", ec))
    return CheckpointManager(dir.parent_path().string()).load(step);
  if (CheckpointManager m(dir.string()); m.latest_step()) return m.load();
  // A dump folder: its config.toml names the checkpoint folder.
  if (fs::is_regular_file(dir / "config.toml", ec)) {
    TrainConfig c;
    apply_toml(
        c,
        [&] {
          std::ifstream f(dir / "config.toml");
          return std::string(std::istreambuf_iterator<char>(f), {});
        }(),
        (dir / "config.toml").string());
    if (CheckpointManager m((dir / c.checkpoint.folder).string()); m.latest_step()) return m.load();
  }
  fail("no checkpoint in '", dir.string(),
       "': pass a run's dump folder, its checkpoint folder or a step-N folder");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  return std::make_unique<Tokenizer>(Tokenizer::load(path));
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  KILN_CHECK(f.good(), "cannot read '", p.string(), "'");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void add_ids(std::vector<int32_t>& to, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (std::find(to.begin(), to.end(), id) == to.end()) to.push_back(id);
}

// The eos ids of an HF folder's generation_config.json, if it has one.
std::vector<int32_t> generation_eos_ids(const fs::path& dir) {
  std::error_code ec;
  const fs::path p = dir / "generation_config.json";
  if (!fs::is_regular_file(p, ec)) return {};
  return parse_eos_token_ids(read_text(p), p.string());
}

// No eos id recorded: the tokenizer's end-of-text token, if it has one.
void add_tokenizer_eos(SavedModel& m) {
  if (auto id = eos_token_id(*m.tokenizer); id && m.eos_ids.empty()) m.eos_ids.push_back(*id);
}

}  // namespace

std::vector<int32_t> hf_folder_eos_ids(const std::string& dir) {
  std::vector<int32_t> ids = read_hf_config((fs::path(dir) / "config.json").string()).eos_token_ids;
  add_ids(ids, generation_eos_ids(dir));
  return ids;
}

namespace {

// A run's checkpoint with what its manifest records: the run's config and
// the model's architecture.
struct RunCheckpoint {
  LoadedCheckpoint ck;
  TrainConfig config;
  ModelConfig mc;
  std::vector<int32_t> eos_ids;  // a fine-tune's
};

RunCheckpoint read_run_checkpoint(const std::string& dir) {
  RunCheckpoint r{find_checkpoint(dir), {}, {}, {}};
  const LoadedCheckpoint& ck = r.ck;
  KILN_CHECK(ck.config.contains("recipe") && ck.config["recipe"].is_string(), "checkpoint ",
             ck.path, " does not record its config: it was not written by kiln train");
  TrainConfig& c = r.config;
  apply_toml(c, ck.config["recipe"].get<std::string>(), ck.path + "/manifest.json [recipe]");
  finalize(c);
  if (ck.config.contains("model")) {  // a fine-tune's, recorded (trainer.cc)
    const std::string source = ck.path + "/manifest.json [model]";
    HfConfig hf = parse_hf_config(ck.config["model"].dump(), source);
    r.mc = resolve_model_config(c, hf.model, source);
    r.mc.name = "fine-tuned from " + c.checkpoint.initial_load_path;
    add_ids(r.eos_ids, hf.eos_token_ids);
    std::error_code ec;
    if (fs::is_directory(c.checkpoint.initial_load_path, ec))
      add_ids(r.eos_ids, generation_eos_ids(c.checkpoint.initial_load_path));
  } else {
    r.mc = resolve_model_config(c);
  }
  return r;
}

// The tokenizer of a run's checkpoint: `given`, else the one its manifest
// records, else one in the step folder or the two folders above it.
std::string checkpoint_tokenizer(const LoadedCheckpoint& ck, const std::string& given) {
  std::string tok = given;
  std::error_code ec;
  if (tok.empty() && ck.config.contains("tokenizer") && ck.config["tokenizer"].is_string() &&
      fs::exists(ck.config["tokenizer"].get<std::string>(), ec))
    tok = ck.config["tokenizer"].get<std::string>();
  // step-N, the checkpoint folder, the dump folder.
  fs::path step_dir = ck.path;
  for (const fs::path& p : {step_dir, step_dir.parent_path(), step_dir.parent_path().parent_path()})
    if (tok.empty() && folder_has_tokenizer(p.string())) tok = p.string();
  KILN_CHECK(!tok.empty(), "cannot find the tokenizer of checkpoint ", ck.path,
             ": pass --tokenizer FILE");
  return tok;
}

// The f32 weights a LoRA run's adapters apply to: its initial_load_path
// folder's, else the model its seed drew (as RunSetup builds it).
nn::StateDict lora_base_weights(const RunCheckpoint& r) {
  const std::string& base = r.config.checkpoint.initial_load_path;
  if (base.empty())
    return build_model(r.mc, DType::f32, uint64_t(r.config.training.seed))->state_dict();
  std::error_code ec;
  KILN_CHECK(fs::is_directory(base, ec), "checkpoint ", r.ck.path, " holds LoRA adapters of '",
             base, "', which is not there any more: the adapters need the model they were "
             "trained on");
  CausalLM model(r.mc, DType::f32);
  load_hf_weights(model, base);
  return model.state_dict();
}

SavedModel model_of(RunCheckpoint r, const std::string& tokenizer_path, DType dtype) {
  SavedModel out;
  out.eos_ids = r.eos_ids;
  out.model = std::make_unique<CausalLM>(r.mc, dtype);
  nn::StateDict sd(r.ck.model.begin(), r.ck.model.end());
  if (r.config.lora.rank > 0)
    sd = merge_lora(lora_base_weights(r), sd, lora_options(r.config).scale());
  out.model->load_state_dict(sd);
  out.tokenizer_path = checkpoint_tokenizer(r.ck, tokenizer_path);
  out.tokenizer = load_tokenizer(out.tokenizer_path);
  out.description = cat(r.ck.path, " (", r.mc.name, r.config.lora.rank > 0 ? ", LoRA merged" : "",
                        ", step ", r.ck.step, ")");
  add_tokenizer_eos(out);
  return out;
}

SavedAdapter adapter_of(const RunCheckpoint& r, const std::string& tokenizer_path) {
  SavedAdapter out;
  out.adapter = run_adapter(r.config, nn::StateDict(r.ck.model.begin(), r.ck.model.end()));
  out.tokenizer_path = checkpoint_tokenizer(r.ck, tokenizer_path);
  out.description = cat(r.ck.path, " (LoRA adapters of ", r.mc.name, ", step ", r.ck.step, ")");
  return out;
}

}  // namespace

SavedModel load_checkpoint_model(const std::string& dir, const std::string& tokenizer_path,
                                 DType dtype) {
  return model_of(read_run_checkpoint(dir), tokenizer_path, dtype);
}

std::variant<SavedModel, SavedAdapter> load_checkpoint_for_export(
    const std::string& dir, const std::string& tokenizer_path, DType dtype, bool merge_lora) {
  RunCheckpoint r = read_run_checkpoint(dir);
  const bool lora = r.config.lora.rank > 0;
  KILN_CHECK(lora || !merge_lora, "--merge-lora: ", r.ck.path,
             " is the checkpoint of a run without LoRA: it has no adapters to merge");
  if (lora && !merge_lora) return adapter_of(r, tokenizer_path);
  return model_of(std::move(r), tokenizer_path, dtype);
}

SavedModel load_peft_merged(const std::string& adapter_dir, const std::string& base,
                            const std::string& tokenizer_path, DType dtype) {
  PeftAdapter adapter = read_peft_adapter(adapter_dir);
  const std::string base_dir = base.empty() ? adapter.base_model : base;
  std::error_code ec;
  KILN_CHECK(!base_dir.empty(), "the PEFT folder '", adapter_dir,
             "' does not name its base model (base_model_name_or_path): pass the base's folder "
             "(kiln convert --base DIR)");
  KILN_CHECK(fs::is_directory(base_dir, ec), "the base model '", base_dir, "' of the PEFT folder '",
             adapter_dir, "' is not a local folder: pass the base's Hugging Face folder");
  std::unique_ptr<CausalLM> base_model = load_hf_model(base_dir, DType::f32);
  nn::StateDict sd =
      merge_lora(base_model->state_dict(), adapter.adapters, adapter.options.scale());
  SavedModel out;
  out.model = std::make_unique<CausalLM>(base_model->config(), dtype);
  out.model->load_state_dict(sd);
  out.eos_ids = hf_folder_eos_ids(base_dir);
  for (const std::string& dir : {tokenizer_path, adapter_dir, base_dir})
    if (out.tokenizer_path.empty() && !dir.empty() &&
        (dir == tokenizer_path || folder_has_tokenizer(dir)))
      out.tokenizer_path = dir;
  if (!out.tokenizer_path.empty()) {
    out.tokenizer = load_tokenizer(out.tokenizer_path);
    add_tokenizer_eos(out);
  }
  out.description = cat(adapter_dir, " (LoRA adapters merged into ", base_dir, ")");
  return out;
}

SavedModel load_hf_model_dir(const std::string& dir, const std::string& tokenizer_path,
                             DType dtype) {
  SavedModel out;
  out.model = load_hf_model(dir, dtype);
  out.tokenizer_path = tokenizer_path.empty() ? dir : tokenizer_path;
  out.tokenizer = load_tokenizer(out.tokenizer_path);
  out.description = dir;
  out.eos_ids = hf_folder_eos_ids(dir);
  add_tokenizer_eos(out);
  return out;
}

}  // namespace kiln::train
