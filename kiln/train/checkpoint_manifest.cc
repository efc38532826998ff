#include "kiln/train/checkpoint_manifest.h"

#include <charconv>
#include <cstdio>

#include "kiln/base/error.h"

namespace kiln::train {
namespace {

using nlohmann::json;

// `v` as an integer in [0, max]; `what` names it in errors.
int64_t bounded_integer(const json& v, int64_t max, const std::string& what) {
  KILN_CHECK(v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(max), what,
             " must be an integer in [0, ", max, "], not ", v.dump());
  return v.get<int64_t>();
}

int64_t integer_field(const json& j, const char* key, int64_t max, const std::string& where) {
  KILN_CHECK(j.contains(key), where, " needs \"", key, "\"");
  return bounded_integer(j[key], max, cat(where, " \"", key, "\""));
}

uint64_t parse_hex64(const json& j, const std::string& where) {
  uint64_t v = 0;
  const std::string* s = j.is_string() ? j.get_ptr<const std::string*>() : nullptr;
  bool ok = s && s->size() == 16;
  if (ok) {
    auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v, 16);
    ok = ec == std::errc() && p == s->data() + s->size();
  }
  KILN_CHECK(ok, where, " needs \"xxh64\" as 16 hex digits, not ", j.dump());
  return v;
}

}  // namespace

std::string checkpoint_shard_file(const char* stem, int64_t i, int64_t n) {
  if (n == 1) return cat(stem, ".safetensors");
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s-%05lld-of-%05lld.safetensors", stem,
                static_cast<long long>(i + 1), static_cast<long long>(n));
  return buf;
}

std::string xxh64_hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

std::string checkpoint_manifest_text(const CheckpointManifest& m) {
  json files = json::object();
  for (const auto& [name, f] : m.files)
    files[name] = {{"bytes", f.bytes}, {"xxh64", xxh64_hex(f.xxh64)}};
  json j = {{"format", "kiln-checkpoint"}, {"version", 1},           {"step", m.step},
            {"files", files},              {"optimizer", m.optimizer}, {"scheduler", m.scheduler},
            {"loader", m.loader},          {"rng", m.rng},             {"config", m.config}};
  if (m.shard_count > 1) j["shards"] = {{"count", m.shard_count}, {"rows", m.full_rows}};
  return j.dump(2) + "\n";
}

CheckpointManifest parse_checkpoint_manifest(std::string_view text, const std::string& path) {
  const std::string where = cat("checkpoint manifest '", path, "'");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, " is corrupt: ", e.what());
  }
  KILN_CHECK(j.is_object() && j.contains("format") && j["format"] == "kiln-checkpoint", where,
             " is corrupt: not a kiln checkpoint manifest");
  KILN_CHECK(!j.contains("version") || j["version"] == 1, where, " has version ",
             j["version"].dump(), "; this kiln reads version 1");
  CheckpointManifest m;
  m.step = integer_field(j, "step", INT64_MAX, where);
  if (j.contains("shards")) {
    const json& shards = j["shards"];
    const std::string at = where + " \"shards\"";
    KILN_CHECK(shards.is_object(), at, " must be an object");
    m.shard_count = integer_field(shards, "count", kMaxCheckpointShards, at);
    KILN_CHECK(m.shard_count >= 1, at, ": \"count\" must be at least 1");
    if (m.shard_count > 1) {
      KILN_CHECK(shards.contains("rows") && shards["rows"].is_object(), at,
                 " needs a \"rows\" object");
      for (const auto& [name, rows] : shards["rows"].items())
        m.full_rows[name] = bounded_integer(rows, INT64_MAX, cat(at, " rows of '", name, "'"));
    }
  }
  KILN_CHECK(j.contains("files") && j["files"].is_object(), where, " needs a \"files\" object");
  for (const char* stem : kCheckpointStems)
    for (int64_t i = 0; i < m.shard_count; ++i) {
      std::string f = checkpoint_shard_file(stem, i, m.shard_count);
      KILN_CHECK(j["files"].contains(f), where, " does not list '", f, "'");
      const json& entry = j["files"][f];
      const std::string at = cat(where, " entry '", f, "'");
      KILN_CHECK(entry.is_object() && entry.contains("xxh64"), at,
                 " needs \"bytes\" and \"xxh64\"");
      m.files[f] = {uint64_t(integer_field(entry, "bytes", INT64_MAX, at)),
                    parse_hex64(entry["xxh64"], at)};
    }
  for (auto [key, out] : {std::pair{"optimizer", &m.optimizer}, {"scheduler", &m.scheduler},
                          {"loader", &m.loader}, {"rng", &m.rng}, {"config", &m.config}}) {
    *out = j.contains(key) ? j[key] : json::object();
    KILN_CHECK(out->is_object(), where, ": \"", key, "\" must be an object");
  }
  // The counters a resume reads, checked here where the file is named.
  if (m.optimizer.contains("step"))
    integer_field(m.optimizer, "step", INT64_MAX, where + " \"optimizer\"");
  for (const char* key : {"samples", "micro"})
    if (m.loader.contains(key)) integer_field(m.loader, key, INT64_MAX, where + " \"loader\"");
  return m;
}

}  // namespace kiln::train
