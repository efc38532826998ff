#include "kiln/runtime/compile_cache.h"

#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "kiln/base/bytes.h"
#include "kiln/base/error.h"
#include "kiln/base/profile.h"

namespace kiln {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool cache_enabled_by_env() {
  std::string v = env("KILN_CACHE");
  if (v.empty() || v == "on" || v == "1") return true;
  if (v == "off" || v == "0") return false;
  fail("KILN_CACHE='", v, "' must be 'on' or 'off' (off keeps only the in-process compile cache)");
}

std::string default_l2_dir() {
  struct stat st;
  if (::stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  return "/dev/shm/kiln-cache-" + std::to_string(::geteuid());
}

std::string default_l3_dir() {
  std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg.front() == '/') return xdg + "/kiln";  // XDG: relative paths are ignored
  std::string home = env("HOME");
  return home.empty() ? "" : home + "/.cache/kiln";
}

}  // namespace

CompileCache::Options CompileCache::Options::from_env() {
  Options o;
  for (auto [name, bound] : {std::pair{"KILN_L1_CACHE_MAX_SIZE", &o.l1_max_bytes},
                             std::pair{"KILN_L2_CACHE_MAX_SIZE", &o.l2_max_bytes},
                             std::pair{"KILN_CACHE_MAX_SIZE", &o.l3_max_bytes}}) {
    const std::string v = env(name);
    if (v.empty()) continue;
    *bound = parse_bytes(v, name);
    KILN_CHECK(*bound > 0, name, "='", v, "' must be more than 0 (KILN_CACHE=off turns the disk tiers off)");
  }
  if (!cache_enabled_by_env()) {
    o.why_off = "KILN_CACHE=off";
    return o;
  }
  o.l2_dir = env("KILN_L2_CACHE_DIR");
  if (o.l2_dir.empty()) o.l2_dir = default_l2_dir();
  o.l3_dir = env("KILN_CACHE_DIR");
  if (o.l3_dir.empty()) o.l3_dir = default_l3_dir();
  return o;
}

CompileCache& CompileCache::instance() {
  // Never destroyed: queue threads may still compile while statics are torn down.
  static CompileCache* cache = new CompileCache(Options::from_env());
  return *cache;
}

CompileCache::CompileCache(Options options) : options_(std::move(options)), l1_(options_.l1_max_bytes) {
  auto open = [&](DiskTier& tier, const std::string& path, const char* label) {
    if (path.empty()) {
      tier.why_off = options_.why_off.empty() ? "no directory configured" : options_.why_off;
      return;
    }
    tier.why_off = prepare_cache_dir(path);
    if (tier.why_off.empty()) {
      tier.dir.emplace(path);
    } else {
      std::cerr << "kiln: compile cache " << label << " is off: " << tier.why_off << "\n";
    }
  };
  open(l2_, options_.l2_dir, "L2");
  open(l3_, options_.l3_dir, "L3");
}

void CompileCache::count(CacheTier t, const std::string& kind, const std::function<void(TierStats&)>& add) {
  add(t == CacheTier::l1 ? stats_.l1 : t == CacheTier::l2 ? stats_.l2 : stats_.l3);
  add(stats_.kinds[kind].tier(t));
}

void CompileCache::say_once(const std::string& topic, const std::string& message) {
  std::lock_guard lock(mu_);
  if (said_.insert(topic).second) std::cerr << message << std::endl;
}

const std::string* CompileCache::l1_hit(const std::string& name) {
  const std::string* payload = l1_.find(name);
  if (!payload) return nullptr;
  count(CacheTier::l1, entry_kind(name), [&](TierStats& s) {
    ++s.requests, ++s.hits;
    s.bytes_read += int64_t(payload->size());
  });
  return payload;
}

std::optional<std::string> CompileCache::lookup_l1(const std::string& name) {
  std::lock_guard lock(mu_);
  if (const std::string* payload = l1_hit(name)) return *payload;
  count(CacheTier::l1, entry_kind(name), [](TierStats& s) { ++s.requests, ++s.misses; });
  return std::nullopt;
}

std::optional<std::string> CompileCache::lookup_disk(CacheTier t, const CacheKey& key, const std::string& name) {
  const CacheDir& dir = *disk(t).dir;
  CacheDir::ReadResult r = dir.read(name);
  if (!r.error.empty()) say_once(dir.path(), "kiln: compile cache: " + r.error + "; treating it as a miss");
  DecodedEntry e;
  if (r.found) e = decode_entry(r.bytes, key, options_.identity);
  if (r.found && e.status == EntryStatus::corrupt) {
    say_once(dir.file(name), "kiln: compile cache entry " + dir.file(name) + " is corrupt (" + e.why +
                                 "); recompiling");
    dir.remove_if_same(name, r.id);
  }
  bool hit = r.found && e.status == EntryStatus::ok;
  if (hit) dir.touch(name);
  std::lock_guard lock(mu_);
  count(t, key.kind, [&](TierStats& s) {
    ++s.requests;
    ++(hit ? s.hits : s.misses);
    if (hit) s.bytes_read += int64_t(e.payload.size());
  });
  if (r.found && e.status == EntryStatus::corrupt) ++stats_.corrupt_entries;
  if (!hit) return std::nullopt;
  return std::move(e.payload);
}

std::optional<std::string> CompileCache::lookup_disks(const CacheKey& key, const std::string& name,
                                                      const char** hit) {
  for (CacheTier t : {CacheTier::l2, CacheTier::l3}) {
    if (!disk(t).dir) continue;
    std::optional<std::string> payload = lookup_disk(t, key, name);
    if (payload) {
      if (hit) *hit = t == CacheTier::l2 ? "l2 hit" : "l3 hit";
      store(key, name, *payload, /*l2=*/t == CacheTier::l3, /*l3=*/false);
      return payload;
    }
  }
  return std::nullopt;
}

void CompileCache::store(const CacheKey& key, const std::string& name, const std::string& payload, bool l2,
                         bool l3) {
  {
    std::lock_guard lock(mu_);
    l1_.insert(name, payload, int64_t(payload.size()));
    count(CacheTier::l1, key.kind, [&](TierStats& s) { s.bytes_written += int64_t(payload.size()); });
  }
  std::string encoded;
  for (CacheTier t : {CacheTier::l2, CacheTier::l3}) {
    if (!disk(t).dir || !(t == CacheTier::l2 ? l2 : l3)) continue;
    if (encoded.empty()) encoded = encode_entry(key, options_.identity, payload);
    const CacheDir& dir = *disk(t).dir;
    std::string error = dir.publish(name, encoded);
    if (!error.empty()) {
      say_once(dir.path(), "kiln: compile cache: " + error + "; carrying on without storing there");
      continue;
    }
    {
      std::lock_guard lock(mu_);
      count(t, key.kind, [&](TierStats& s) { s.bytes_written += int64_t(payload.size()); });
    }
    trim_if_full(t, name, int64_t(encoded.size()));
  }
}

void CompileCache::trim_if_full(CacheTier t, const std::string& name, int64_t bytes) {
  DiskTier& tier = disk(t);
  {
    std::lock_guard lock(mu_);
    if (tier.estimate >= 0 && tier.estimate + bytes <= max_bytes(t)) {
      tier.estimate += bytes;
      return;
    }
  }
  const int64_t left = tier.dir->trim(max_bytes(t), name);
  std::lock_guard lock(mu_);
  tier.estimate = left;
}

std::optional<std::string> CompileCache::get(const CacheKey& key) {
  std::string name = entry_name(key);
  if (auto payload = lookup_l1(name)) return payload;
  return lookup_disks(key, name);
}

bool CompileCache::has(const CacheKey& key) const {
  const std::string name = entry_name(key);
  {
    std::lock_guard lock(mu_);
    if (l1_.contains(name)) return true;
  }
  for (const DiskTier* t : {&l2_, &l3_}) {
    std::error_code ec;
    if (t->dir && std::filesystem::exists(t->dir->file(name), ec)) return true;
  }
  return false;
}

void CompileCache::put(const CacheKey& key, const std::string& payload) {
  store(key, entry_name(key), payload, true, true);
}

std::string CompileCache::get_or_compile(const CacheKey& key, const std::function<std::string()>& compile) {
  std::string name = entry_name(key);
  // This caller's hold on the key's compile lock; the lock leaves compiling_
  // with its last holder. Holds are taken and dropped under mu_, so the count
  // is exact there.
  struct Hold {
    CompileCache& cache;
    const std::string& name;
    std::shared_ptr<std::mutex> mutex;
    Hold(CompileCache& c, const std::string& n, std::shared_ptr<std::mutex> m)
        : cache(c), name(n), mutex(std::move(m)) {}
    Hold(const Hold&) = delete;
    ~Hold() {
      std::lock_guard lock(cache.mu_);
      mutex.reset();
      auto it = cache.compiling_.find(name);
      if (it->second.use_count() == 1) cache.compiling_.erase(it);
    }
  };
  std::optional<Hold> in_process;
  {
    std::lock_guard lock(mu_);
    if (const std::string* payload = l1_hit(name)) return *payload;  // the common case: no other lock
    auto& slot = compiling_[name];
    if (!slot) slot = std::make_shared<std::mutex>();
    in_process.emplace(*this, name, slot);
  }
  profile::Span span("compile", key.kind);
  const char* tier = "l1 hit";
  auto result = [&](std::string payload) {
    span.arg("cache", tier);
    return payload;
  };
  // Threads missing the same key queue here; the first compiles, the others
  // then find its payload in L1. Lookups are counted once their answer is final.
  std::lock_guard compiling(*in_process->mutex);
  if (auto payload = lookup_l1(name)) return result(std::move(*payload));
  const DiskTier& lock_tier = l2_.dir ? l2_ : l3_;
  CacheDir::Lock across_processes = lock_tier.dir ? lock_tier.dir->lock(name) : CacheDir::Lock();
  if (auto payload = lookup_disks(key, name, &tier)) return result(std::move(*payload));
  tier = "miss: compiled";

  auto start = std::chrono::steady_clock::now();
  std::string payload = compile();
  std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard lock(mu_);
    CacheTier last = l3_.dir ? CacheTier::l3 : l2_.dir ? CacheTier::l2 : CacheTier::l1;
    count(last, key.kind, [&](TierStats& s) { s.compile_seconds += seconds.count(); });
  }
  store(key, name, payload, true, true);
  return result(std::move(payload));
}

void CompileCache::record_run_stats() {
  if (!l3_.dir) return;
  const CacheStats now = stats();
  if (now.kinds.empty()) return;
  const CacheDir& dir = *l3_.dir;
  CacheDir::Lock held = dir.lock(CacheDir::kRunStats);
  std::map<std::string, KindStats> total = recorded_stats();
  for (auto [kind, k] : now.kinds)
    for (CacheTier t : {CacheTier::l1, CacheTier::l2, CacheTier::l3}) add_stats(total[kind].tier(t), k.tier(t));
  std::string error = dir.publish(CacheDir::kRunStats, format_run_stats(total));
  if (!error.empty()) say_once(dir.path(), "kiln: compile cache: " + error + "; run statistics not kept");
}

std::map<std::string, KindStats> CompileCache::recorded_stats() const {
  if (!l3_.dir) return {};
  CacheDir::ReadResult r = l3_.dir->read(CacheDir::kRunStats);
  return r.found ? parse_run_stats(r.bytes) : std::map<std::string, KindStats>{};
}

size_t CompileCache::compiles_in_flight() const {
  std::lock_guard lock(mu_);
  return compiling_.size();
}

void CompileCache::count_l1_hit(const std::string& kind) {
  std::lock_guard lock(mu_);
  count(CacheTier::l1, kind, [](TierStats& s) { ++s.requests, ++s.hits; });
}

CacheStats CompileCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CompileCache::reset_stats() {
  std::lock_guard lock(mu_);
  stats_ = {};
}

void CompileCache::clear(bool l1, bool l2, bool l3) {
  if (l1) {
    std::lock_guard lock(mu_);
    l1_.clear();
  }
  if (l2 && l2_.dir) l2_.dir->clear();
  if (l3 && l3_.dir) l3_.dir->clear();
}

std::string CompileCache::l2_dir() const { return l2_.dir ? l2_.dir->path() : ""; }
std::string CompileCache::l3_dir() const { return l3_.dir ? l3_.dir->path() : ""; }

std::string CompileCache::disabled_reason(CacheTier tier) const {
  return tier == CacheTier::l1 ? "" : disk(tier).why_off;
}

int64_t CompileCache::max_bytes(CacheTier tier) const {
  return tier == CacheTier::l1   ? options_.l1_max_bytes
         : tier == CacheTier::l2 ? options_.l2_max_bytes
                                 : options_.l3_max_bytes;
}

CacheDir::Usage CompileCache::disk_usage(CacheTier tier) const {
  if (tier == CacheTier::l1 || !disk(tier).dir) return {};
  return disk(tier).dir->usage(options_.identity);
}

}  // namespace kiln
