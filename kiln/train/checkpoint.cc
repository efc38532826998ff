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

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";

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
  KILN_CHECK(data.step >= 0, "checkpoint step must be >= 0, not ", data.step);
  std::error_code ec;
  fs::create_directories(folder_, ec);
  KILN_CHECK(!ec, "cannot create checkpoint folder '", folder_, "': ", ec.message());
  remove_stale_temporaries(folder_);

  std::string path = (fs::path(folder_) / step_dir_name(data.step)).string();
  AtomicDir dir(path);
  fs::path tmp = dir.temp_path();
  const std::map<std::string, std::string> meta = {{"format", "kiln-checkpoint"},
                                                   {"step", std::to_string(data.step)}};
  save_safetensors((tmp / kModelFile).string(), data.model, meta);
  save_safetensors((tmp / kOptimizerFile).string(), data.optimizer, meta);
  nlohmann::json files = nlohmann::json::object();
  for (const char* f : {kModelFile, kOptimizerFile}) {
    FileDigest d = digest((tmp / f).string());
    files[f] = {{"bytes", d.bytes}, {"xxh64", hex(d.hash)}};
  }
  nlohmann::json manifest = {{"format", "kiln-checkpoint"},
                             {"version", 1},
                             {"step", data.step},
                             {"files", files},
                             {"optimizer", data.optimizer_state},
                             {"scheduler", data.scheduler},
                             {"loader", data.loader},
                             {"rng", data.rng},
                             {"config", data.config}};
  // Written last: its presence marks the step complete (commit fsyncs it too).
  write_file_atomic((tmp / kManifest).string(), manifest.dump(2) + "\n");
  dir.commit();

  if (keep_latest_ > 0) {
    auto all = steps();
    for (size_t i = 0; i + size_t(keep_latest_) < all.size(); ++i)
      fs::remove_all(fs::path(folder_) / step_dir_name(all[i]), ec);
  }
  return path;
}

std::vector<int64_t> CheckpointManager::steps() const {
  std::vector<int64_t> out;
  std::error_code ec;
  if (!fs::is_directory(folder_, ec)) return out;
  for (const auto& e : fs::directory_iterator(folder_, ec)) {
    auto step = parse_step_dir(e.path().filename().string());
    if (step && e.is_directory() && fs::exists(e.path() / kManifest, ec)) out.push_back(*step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

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
  for (const char* f : {kModelFile, kOptimizerFile}) {
    std::string path = (fs::path(out.path) / f).string();
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
  out.model = read_tensors((fs::path(out.path) / kModelFile).string());
  out.optimizer = read_tensors((fs::path(out.path) / kOptimizerFile).string());
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
