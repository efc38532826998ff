#include "kiln/train/saved_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"
#include "kiln/models/hf_config.h"
#include "kiln/models/hf_dir.h"
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

SavedModel load_checkpoint_model(const std::string& dir, const std::string& tokenizer_path,
                                 DType dtype) {
  LoadedCheckpoint ck = find_checkpoint(dir);
  KILN_CHECK(ck.config.contains("recipe") && ck.config["recipe"].is_string(), "checkpoint ",
             ck.path, " does not record its config: it was not written by kiln train");
  TrainConfig c;
  apply_toml(c, ck.config["recipe"].get<std::string>(), ck.path + "/manifest.json [recipe]");
  finalize(c);
  ModelConfig mc;
  SavedModel out;
  if (ck.config.contains("model")) {  // a fine-tune's, recorded (trainer.cc)
    const std::string source = ck.path + "/manifest.json [model]";
    HfConfig hf = parse_hf_config(ck.config["model"].dump(), source);
    mc = resolve_model_config(c, hf.model, source);
    mc.name = "fine-tuned from " + c.checkpoint.initial_load_path;
    add_ids(out.eos_ids, hf.eos_token_ids);
    std::error_code ec;
    if (fs::is_directory(c.checkpoint.initial_load_path, ec))
      add_ids(out.eos_ids, generation_eos_ids(c.checkpoint.initial_load_path));
  } else {
    mc = resolve_model_config(c);
  }
  out.model = std::make_unique<CausalLM>(mc, dtype);
  nn::StateDict sd(ck.model.begin(), ck.model.end());
  out.model->load_state_dict(sd);

  std::string tok = tokenizer_path;
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
  out.tokenizer = load_tokenizer(tok);
  out.tokenizer_path = tok;
  out.description = cat(ck.path, " (", mc.name, ", step ", ck.step, ")");
  add_tokenizer_eos(out);
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
