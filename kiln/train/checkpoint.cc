#include "kiln/train/checkpoint.h"

#include <signal.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/models/hf_dir.h"
#include "kiln/ops/shape.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kStems[] = {"model", "optimizer"};

// "model.safetensors" alone; shard i of n > 1: "model-0000<i+1>-of-0000<n>.safetensors".
std::string shard_file(const char* stem, int64_t i, int64_t n) {
  if (n == 1) return cat(stem, ".safetensors");
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s-%05lld-of-%05lld.safetensors", stem,
                static_cast<long long>(i + 1), static_cast<long long>(n));
  return buf;
}

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

std::string hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

bool pid_alive(long pid) { return ::kill(pid_t(pid), 0) == 0 || errno == EPERM; }

// Temporary directories left by dead writers ("step-N.tmp.<pid>").
void remove_stale_temporaries(const std::string& folder) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    std::string name = e.path().filename().string();
    auto at = name.find(".tmp.");
    if (!name.starts_with("step-") || at == std::string::npos) continue;
    long pid = std::atol(name.c_str() + at + 5);
    if (pid == long(::getpid()) || !pid_alive(pid)) fs::remove_all(e.path(), ec);
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
                                           const nlohmann::json& rows) {
  if (paths.size() == 1) return read_tensors(paths[0]);
  std::map<std::string, std::vector<Tensor>> parts;
  for (const std::string& p : paths)
    for (auto& [name, t] : read_tensors(p)) parts[name].push_back(t);
  std::map<std::string, Tensor> out;
  for (auto& [name, shards] : parts) {
    KILN_CHECK(shards.size() == paths.size() && rows.contains(name), "sharded checkpoint file '",
               paths[0], "': tensor '", name, "' is not in every shard with its rows");
    out.emplace(name, concat(shards, 0).slice(0, 0, rows[name].get<int64_t>()).contiguous());
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
  for (const char* stem : kStems) {
    bool model = stem == kStems[0];
    std::string path =
        (fs::path(temp_dir) / shard_file(stem, data.shard_index, data.shard_count)).string();
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
  const int64_t n = data.shard_count;
  nlohmann::json files = nlohmann::json::object();
  for (const ShardDigest& d : shards) {
    if (d.index < 0) continue;
    files[shard_file(kStems[0], d.index, n)] = {{"bytes", d.model_bytes},
                                                {"xxh64", hex(d.model_hash)}};
    files[shard_file(kStems[1], d.index, n)] = {{"bytes", d.optimizer_bytes},
                                                {"xxh64", hex(d.optimizer_hash)}};
  }
  KILN_CHECK(int64_t(files.size()) == 2 * n, "checkpoint step ", data.step, ": ",
             files.size() / 2, " of its ", n, " shards were written");
  nlohmann::json manifest = {{"format", "kiln-checkpoint"},
                             {"version", 1},
                             {"step", data.step},
                             {"files", files},
                             {"optimizer", data.optimizer_state},
                             {"scheduler", data.scheduler},
                             {"loader", data.loader},
                             {"rng", data.rng},
                             {"config", data.config}};
  if (n > 1) manifest["shards"] = {{"count", n}, {"rows", data.full_rows}};
  // Written last: its presence marks the step complete (commit fsyncs it too).
  write_file_atomic((fs::path(dir->temp_path()) / kManifest).string(), manifest.dump(2) + "\n");
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
  std::string manifest_path = (fs::path(out.path) / kManifest).string();
  nlohmann::json manifest;
  {
    std::ifstream in(manifest_path);
    KILN_CHECK(in, "cannot read checkpoint manifest '", manifest_path, "'");
    try {
      manifest = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("checkpoint manifest '", manifest_path, "' is corrupt: ", e.what());
    }
  }
  KILN_CHECK(manifest.is_object() && manifest.value("format", "") == "kiln-checkpoint" &&
                 manifest.contains("files") && manifest["files"].is_object() &&
                 manifest.contains("step") && manifest["step"].is_number_integer(),
             "checkpoint manifest '", manifest_path, "' is corrupt: not a kiln checkpoint manifest");
  KILN_CHECK(manifest["step"].get<int64_t>() == *step, "checkpoint manifest '", manifest_path,
             "' is for step ", manifest["step"].get<int64_t>(), ", not ", *step);
  const nlohmann::json shards = manifest.value("shards", nlohmann::json::object());
  const int64_t n = shards.value("count", int64_t(1));
  KILN_CHECK(n >= 1 && (n == 1 || shards.contains("rows")), "checkpoint manifest '",
             manifest_path, "' is corrupt: a bad \"shards\" entry");
  std::map<std::string, std::vector<std::string>> paths;  // stem -> its shard files
  for (const char* stem : kStems)
    for (int64_t i = 0; i < n; ++i) {
      std::string f = shard_file(stem, i, n);
      std::string path = (fs::path(out.path) / f).string();
      paths[stem].push_back(path);
      KILN_CHECK(manifest["files"].contains(f), "checkpoint manifest '", manifest_path,
                 "' does not list '", f, "'");
      const auto& want = manifest["files"][f];
      KILN_CHECK(want.is_object() && want.contains("bytes") && want.contains("xxh64"),
                 "checkpoint manifest '", manifest_path, "' has a corrupt entry for '", f, "'");
      FileDigest d = digest(path);
      KILN_CHECK(d.bytes == want["bytes"].get<uint64_t>(), "checkpoint file '", path, "' has ",
                 d.bytes, " bytes but its manifest says ", want["bytes"].get<uint64_t>(),
                 " (truncated or replaced)");
      KILN_CHECK(hex(d.hash) == want["xxh64"].get<std::string>(), "checkpoint file '", path,
                 "' is corrupt: its checksum does not match the manifest");
    }
  const nlohmann::json rows = shards.value("rows", nlohmann::json::object());
  out.model = read_sharded(paths[kStems[0]], rows);
  out.optimizer = read_sharded(paths[kStems[1]], rows);
  auto section = [&](const char* key) {
    return manifest.contains(key) ? manifest[key] : nlohmann::json::object();
  };
  out.optimizer_state = section("optimizer");
  out.scheduler = section("scheduler");
  out.loader = section("loader");
  out.rng = section("rng");
  out.config = section("config");
  return out;
}

bool checkpoint_due(int64_t step, int64_t total, int64_t interval) {
  return step == total || (interval > 0 && step % interval == 0);
}

void export_hf(const CausalLM& model, const std::string& tokenizer_path, const std::string& dir) {
  HfSaveOptions options;
  options.overwrite = true;
  save_hf_model(model, dir, options);
  if (tokenizer_path.empty()) return;
  fs::path src = tokenizer_path;
  std::error_code ec;
  fs::path src_dir = fs::is_directory(src, ec) ? src : src.parent_path();
  std::vector<std::string> names;
  if (fs::is_directory(src, ec)) {
    names = {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json",
             "special_tokens_map.json"};
  } else if (src.filename() == "vocab.json") {
    names = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"};
  } else {
    KILN_CHECK(fs::is_regular_file(src, ec), "tokenizer '", tokenizer_path, "' does not exist");
    copy_file_atomic(src, fs::path(dir) / "tokenizer.json");
    names = {"tokenizer_config.json", "special_tokens_map.json"};
  }
  for (const auto& n : names)
    if (fs::is_regular_file(src_dir / n, ec)) copy_file_atomic(src_dir / n, fs::path(dir) / n);
  // transformers' AutoTokenizer wants a tokenizer_config.json; a generic one
  // loads any tokenizer.json.
  if (!fs::exists(fs::path(dir) / "tokenizer_config.json", ec) &&
      fs::exists(fs::path(dir) / "tokenizer.json", ec))
    write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(),
                      "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n");
}

}  // namespace kiln::train
