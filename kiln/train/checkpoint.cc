#include "kiln/train/checkpoint.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/base/process.h"
#include "kiln/data/tokenizer.h"
#include "kiln/io/atomic_file.h"
#include "kiln/models/hf_dir.h"
#include "kiln/ops/shape.h"
#include "kiln/train/checkpoint_manifest.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
// "step-N" -> N; nullopt for anything else (temporary directories included).
std::optional<int64_t> parse_step_dir(const std::string& name) {
  if (!name.starts_with("step-") || name.size() == 5) return std::nullopt;
  int64_t step = 0;
  const char* b = name.data() + 5;
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, step);
  if (ec != std::errc() || p != e || step < 0) return std::nullopt;
  return step;
}

struct FileDigest {
  uint64_t bytes = 0, hash = 0;
};

// xxh64 of a file's contents, read in chunks; kiln::Error naming it when unreadable.
FileDigest digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "checkpoint file '", path, "' is missing or unreadable");
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  std::vector<char> buf(1 << 20);
  FileDigest d;
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    auto n = size_t(in.gcount());
    XXH64_update(st, buf.data(), n);
    d.bytes += n;
  }
  bool bad = in.bad();
  d.hash = XXH64_digest(st);
  XXH64_freeState(st);
  KILN_CHECK(!bad, "error reading checkpoint file '", path, "'");
  return d;
}

// Temporary directories left by dead writers ("step-N.tmp.<pid>").
void remove_stale_temporaries(const std::string& folder) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    std::string name = e.path().filename().string();
    auto at = name.find(".tmp.");
    if (!name.starts_with("step-") || at == std::string::npos) continue;
    long pid = std::atol(name.c_str() + at + 5);
    if (pid == long(::getpid()) || !process_alive(pid_t(pid))) fs::remove_all(e.path(), ec);
  }
}

std::map<std::string, Tensor> read_tensors(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, Tensor> out;
  for (const auto& e : file.entries()) out.emplace(e.name, file.get(e.name));
  return out;
}

// The full tensors of n shard files: each tensor's shards concatenated
// along dim 0, the padding rows dropped.
std::map<std::string, Tensor> read_sharded(const std::vector<std::string>& paths,
                                           const std::map<std::string, int64_t>& rows) {
  if (paths.size() == 1) return read_tensors(paths[0]);
  std::map<std::string, std::vector<Tensor>> parts;
  for (const std::string& p : paths)
    for (auto& [name, t] : read_tensors(p)) parts[name].push_back(t);
  std::map<std::string, Tensor> out;
  for (auto& [name, shards] : parts) {
    KILN_CHECK(shards.size() == paths.size() && rows.contains(name), "sharded checkpoint file '",
               paths[0], "': tensor '", name, "' is not in every shard with its rows");
    Tensor whole = concat(shards, 0);
    const int64_t n = rows.at(name);
    KILN_CHECK(n <= whole.shape()[0], "sharded checkpoint file '", paths[0], "': tensor '", name,
               "' has ", whole.shape()[0], " rows in its shards, fewer than the manifest's ", n);
    out.emplace(name, whole.slice(0, 0, n).contiguous());
  }
  return out;
}

void copy_file_atomic(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  KILN_CHECK(in, "cannot read tokenizer file '", from.string(), "'");
  std::ostringstream os;
  os << in.rdbuf();
  write_file_atomic(to.string(), os.str());
}

}  // namespace

nlohmann::json rng_to_json(const Generator& g) {
  return {{"seed", g.seed()}, {"offset", g.offset()}};
}

Generator rng_from_json(const nlohmann::json& j) {
  KILN_CHECK(j.is_object() && j.contains("seed") && j["seed"].is_number_unsigned() &&
                 j.contains("offset") && j["offset"].is_number_unsigned(),
             "the checkpoint's rng state needs unsigned \"seed\" and \"offset\"");
  return Generator(j["seed"].get<uint64_t>(), j["offset"].get<uint64_t>());
}

CheckpointManager::CheckpointManager(std::string folder, int keep_latest)
    : folder_(std::move(folder)), keep_latest_(keep_latest) {
  KILN_CHECK(!folder_.empty(), "checkpoint folder is empty");
}

std::string CheckpointManager::step_dir_name(int64_t step) { return cat("step-", step); }

std::string CheckpointManager::save(const CheckpointData& data) {
  std::string temp = begin(data.step);
  return commit(data, {write_shard(temp, data)});
}

CheckpointData CheckpointData::on_host() const { return on_host(CheckpointData{}); }

CheckpointData CheckpointData::on_host(CheckpointData reuse) const {
  CheckpointData out = *this;
  if (!host) {
    if (!reuse.host) reuse.host.emplace();
    out.host = HostCopy{copy_to_host(model, std::move(reuse.host->model)),
                        copy_to_host(optimizer, std::move(reuse.host->optimizer))};
  }
  out.model.clear();
  out.optimizer.clear();
  return out;
}

std::string CheckpointManager::begin(int64_t step) {
  KILN_CHECK(step >= 0, "checkpoint step must be >= 0, not ", step);
  std::error_code ec;
  fs::create_directories(folder_, ec);
  KILN_CHECK(!ec, "cannot create checkpoint folder '", folder_, "': ", ec.message());
  remove_stale_temporaries(folder_);
  pending_ = std::make_shared<AtomicDir>((fs::path(folder_) / step_dir_name(step)).string());
  return pending_->temp_path();
}

ShardDigest CheckpointManager::write_shard(const std::string& temp_dir,
                                           const CheckpointData& data) const {
  KILN_CHECK(data.shard_count >= 1 && data.shard_index >= 0 &&
                 data.shard_index < data.shard_count,
             "checkpoint: shard ", data.shard_index, " of ", data.shard_count);
  const std::map<std::string, std::string> meta = {{"format", "kiln-checkpoint"},
                                                   {"step", std::to_string(data.step)}};
  ShardDigest out;
  out.index = data.shard_index;
  for (const char* stem : kCheckpointStems) {
    // Compared as text: the array may be a copy (copy relocation), its pointers another's.
    const bool model = std::string_view(stem) == kCheckpointStems[0];
    const std::string file = checkpoint_shard_file(stem, data.shard_index, data.shard_count);
    std::string path = (fs::path(temp_dir) / file).string();
    if (data.host)
      save_safetensors(path, model ? data.host->model : data.host->optimizer, meta);
    else
      save_safetensors(path, model ? data.model : data.optimizer, meta);
    FileDigest d = digest(path);
    (model ? out.model_bytes : out.optimizer_bytes) = d.bytes;
    (model ? out.model_hash : out.optimizer_hash) = d.hash;
  }
  return out;
}

std::string CheckpointManager::commit(const CheckpointData& data,
                                      const std::vector<ShardDigest>& shards) {
  KILN_CHECK(pending_, "checkpoint: commit() without begin()");
  std::shared_ptr<AtomicDir> dir = std::move(pending_);
  CheckpointManifest manifest;
  manifest.step = data.step;
  manifest.shard_count = data.shard_count;
  for (const ShardDigest& d : shards) {
    if (d.index < 0) continue;
    manifest.files[checkpoint_shard_file(kCheckpointStems[0], d.index, data.shard_count)] = {
        d.model_bytes, d.model_hash};
    manifest.files[checkpoint_shard_file(kCheckpointStems[1], d.index, data.shard_count)] = {
        d.optimizer_bytes, d.optimizer_hash};
  }
  KILN_CHECK(int64_t(manifest.files.size()) == 2 * data.shard_count, "checkpoint step ",
             data.step, ": ", manifest.files.size() / 2, " of its ", data.shard_count,
             " shards were written");
  if (data.shard_count > 1) manifest.full_rows = data.full_rows;
  manifest.optimizer = data.optimizer_state;
  manifest.scheduler = data.scheduler;
  manifest.loader = data.loader;
  manifest.rng = data.rng;
  manifest.config = data.config;
  // Written last: its presence marks the step complete (commit fsyncs it too).
  write_file_atomic((fs::path(dir->temp_path()) / kManifest).string(),
                    checkpoint_manifest_text(manifest));
  dir->commit();

  if (keep_latest_ > 0) {
    // Removed atomically: a kill while deleting leaves a temporary that a
    // later save removes, never a step that looks complete and is not.
    auto all = steps();
    for (size_t i = 0; i + size_t(keep_latest_) < all.size(); ++i)
      remove_dir_atomic((fs::path(folder_) / step_dir_name(all[i])).string());
  }
  return dir->path();
}

std::vector<int64_t> CheckpointManager::step_dirs(bool with_manifest) const {
  std::vector<int64_t> out;
  std::error_code ec;
  if (!fs::is_directory(folder_, ec)) return out;
  for (const auto& e : fs::directory_iterator(folder_, ec)) {
    auto step = parse_step_dir(e.path().filename().string());
    if (step && e.is_directory() && fs::exists(e.path() / kManifest, ec) == with_manifest)
      out.push_back(*step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> CheckpointManager::steps() const { return step_dirs(true); }
std::vector<int64_t> CheckpointManager::steps_without_manifest() const { return step_dirs(false); }

std::optional<int64_t> CheckpointManager::latest_step() const {
  auto all = steps();
  if (all.empty()) return std::nullopt;
  return all.back();
}

LoadedCheckpoint CheckpointManager::load(std::optional<int64_t> step) const {
  auto all = steps();
  if (!step) {
    KILN_CHECK(!all.empty(), "no complete checkpoint in '", folder_, "'");
    step = all.back();
  }
  if (std::find(all.begin(), all.end(), *step) == all.end()) {
    std::string have;
    for (int64_t s : all) have += (have.empty() ? "" : ", ") + std::to_string(s);
    fail("no complete checkpoint for step ", *step, " in '", folder_, "' (",
         have.empty() ? std::string("there are none") : "steps there: " + have, ")");
  }
  LoadedCheckpoint out;
  out.step = *step;
  out.path = (fs::path(folder_) / step_dir_name(*step)).string();
  const std::string manifest_path = (fs::path(out.path) / kManifest).string();
  std::string text;
  {
    std::ifstream in(manifest_path, std::ios::binary);
    KILN_CHECK(in, "cannot read checkpoint manifest '", manifest_path, "'");
    std::ostringstream os;
    os << in.rdbuf();
    text = os.str();
  }
  const CheckpointManifest manifest = parse_checkpoint_manifest(text, manifest_path);
  KILN_CHECK(manifest.step == *step, "checkpoint manifest '", manifest_path, "' is for step ",
             manifest.step, ", not ", *step);
  std::map<std::string, std::vector<std::string>> paths;  // stem -> its shard files
  for (const char* stem : kCheckpointStems)
    for (int64_t i = 0; i < manifest.shard_count; ++i) {
      const std::string f = checkpoint_shard_file(stem, i, manifest.shard_count);
      const std::string path = (fs::path(out.path) / f).string();
      paths[stem].push_back(path);
      const ManifestFile& want = manifest.files.at(f);
      FileDigest d = digest(path);
      KILN_CHECK(d.bytes == want.bytes, "checkpoint file '", path, "' has ", d.bytes,
                 " bytes but its manifest says ", want.bytes, " (truncated or replaced)");
      KILN_CHECK(d.hash == want.xxh64, "checkpoint file '", path,
                 "' is corrupt: its checksum does not match the manifest");
    }
  out.model = read_sharded(paths[kCheckpointStems[0]], manifest.full_rows);
  out.optimizer = read_sharded(paths[kCheckpointStems[1]], manifest.full_rows);
  out.optimizer_state = manifest.optimizer;
  out.scheduler = manifest.scheduler;
  out.loader = manifest.loader;
  out.rng = manifest.rng;
  out.config = manifest.config;
  return out;
}

bool checkpoint_due(int64_t step, int64_t total, int64_t interval) {
  return step == total || (interval > 0 && step % interval == 0);
}

void copy_tokenizer_files(const std::string& tokenizer_path, const std::string& dir) {
  fs::path src = tokenizer_path;
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path src_dir = fs::is_directory(src, ec) ? src : src.parent_path();
  // The files that describe the tokenizer besides its vocabulary.
  std::vector<std::string> names = {"tokenizer_config.json", "special_tokens_map.json",
                                    "chat_template.jinja"};
  if (fs::is_directory(src, ec)) {
    names.insert(names.end(), {"tokenizer.json", "vocab.json", "merges.txt"});
  } else if (src.filename() == "vocab.json") {
    names.insert(names.end(), {"vocab.json", "merges.txt"});
  } else {
    KILN_CHECK(fs::is_regular_file(src, ec), "tokenizer '", tokenizer_path, "' does not exist");
    copy_file_atomic(src, fs::path(dir) / "tokenizer.json");
  }
  for (const auto& n : names)
    if (fs::is_regular_file(src_dir / n, ec)) copy_file_atomic(src_dir / n, fs::path(dir) / n);
}

namespace {

// generation_config.json as transformers writes it (keys sorted, indented
// by two): the id generation starts with and those it stops at, each left
// out when unknown, one eos id as a number and several as a list.
std::string generation_config_json(std::optional<int32_t> bos, const std::vector<int32_t>& eos) {
  nlohmann::json j = nlohmann::json::object();
  if (bos) j["bos_token_id"] = *bos;
  if (eos.size() == 1) j["eos_token_id"] = eos[0];
  if (eos.size() > 1) j["eos_token_id"] = eos;
  return j.dump(2) + "\n";
}

}  // namespace

void export_hf(const CausalLM& model, const std::string& tokenizer_path, const std::string& dir,
               const std::vector<int32_t>& eos_ids) {
  if (const fs::path parent = fs::path(dir).parent_path(); !parent.empty())
    fs::create_directories(parent);
  AtomicDir out(dir);
  const fs::path tmp = out.temp_path();
  HfSaveOptions options;
  options.overwrite = true;  // the empty temporary folder
  save_hf_model(model, tmp.string(), options);
  std::optional<int32_t> bos;
  std::vector<int32_t> eos = eos_ids;
  if (!tokenizer_path.empty()) {
    copy_tokenizer_files(tokenizer_path, tmp.string());
    // transformers' AutoTokenizer wants a tokenizer_config.json; a generic
    // one loads any tokenizer.json.
    std::error_code ec;
    if (!fs::exists(tmp / "tokenizer_config.json", ec) && fs::exists(tmp / "tokenizer.json", ec))
      write_file_atomic((tmp / "tokenizer_config.json").string(),
                        "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n");
    const Tokenizer tok = Tokenizer::load(tokenizer_path);
    bos = bos_token_id(tok);
    if (auto id = eos_token_id(tok); id && eos.empty()) eos.push_back(*id);
  }
  write_file_atomic((tmp / "generation_config.json").string(), generation_config_json(bos, eos));
  out.commit();
}

}  // namespace kiln::train
