// The tiered compile cache: compiled artifacts (programs, fused-kernel shared
// objects, ...) keyed by a graph's three fingerprints and a kind.
//
//   L1  an in-process map, bounded ($KILN_L1_CACHE_MAX_SIZE, default
//       256 MiB): past the bound the least recently used entries leave it
//       (the program cache keeps its ready programs under the same bound);
//   L2  a host-local directory shared by the processes of one host, so that
//       several ranks compile once (default /dev/shm/kiln-cache-<uid>,
//       $KILN_L2_CACHE_DIR);
//   L3  a persistent directory reused across runs ($KILN_CACHE_DIR, default
//       $XDG_CACHE_HOME/kiln or ~/.cache/kiln).
// Each disk tier is bounded ($KILN_L2_CACHE_MAX_SIZE, default 1 GiB, as L2
// is memory; $KILN_CACHE_MAX_SIZE, default 5 GiB): a process that stores
// past the bound removes the least recently used entries (CacheDir::trim).
// The bound holds per process, roughly: each counts what it writes itself
// and looks at the directory again only when that could cross the bound.
// KILN_CACHE=off turns L2 and L3 off. A directory that cannot be used turns
// its tier off with one line on stderr.
//
// Disk entries are versioned and checksummed (cache_entry.h): an entry from
// another kiln version or compiler is a miss; a corrupt or truncated one is
// reported once on stderr, deleted and recompiled. Writes publish atomically
// and compile-once across processes holds a lock file (cache_dir.h). A cache
// that cannot write (disk full, say) warns once and carries on: the cache
// never makes a run fail.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "kiln/base/lru_map.h"
#include "kiln/runtime/cache_dir.h"
#include "kiln/runtime/cache_stats.h"
#include "kiln/runtime/cache_entry.h"
#include "kiln/runtime/cache_key.h"

namespace kiln {

class CompileCache {
 public:
  struct Options {
    std::string l2_dir;  // "" turns L2 off
    std::string l3_dir;  // "" turns L3 off
    EntryIdentity identity = build_identity();  // tests override it to play another version
    std::string why_off;  // why both directories are "", for messages ("KILN_CACHE=off")
    int64_t l1_max_bytes = int64_t(256) << 20;
    int64_t l2_max_bytes = int64_t(1) << 30;
    int64_t l3_max_bytes = int64_t(5) << 30;
    // KILN_CACHE, KILN_L2_CACHE_DIR, KILN_CACHE_DIR, XDG_CACHE_HOME, HOME,
    // KILN_L1_CACHE_MAX_SIZE, KILN_L2_CACHE_MAX_SIZE, KILN_CACHE_MAX_SIZE.
    // Throws kiln::Error for a KILN_CACHE other than on/off/1/0, or a size
    // that is not one (or is 0).
    static Options from_env();
  };

  // The process's cache, configured by Options::from_env() at first use.
  static CompileCache& instance();
  explicit CompileCache(Options options);
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  // Looks in L1, then L2, then L3; a hit is copied into the faster tiers.
  std::optional<std::string> get(const CacheKey& key);
  // Stores in every enabled tier.
  void put(const CacheKey& key, const std::string& payload);
  // get(), and on a miss runs `compile`, stores and returns its payload.
  // Callers missing the same key wait for the first one's result instead of
  // compiling again: threads of this process, and other processes through the
  // lock file in L2 (in L3 when L2 is off). `compile` may itself call
  // get_or_compile for other keys of a kind that never nests back (a program
  // compiling its fused kernels), never for its own key. If it throws,
  // nothing is stored and the exception propagates.
  std::string get_or_compile(const CacheKey& key, const std::function<std::string()>& compile);

  // Whether an entry for `key` is in L1 or a file for it in L2 or L3 (not
  // read, so a stale or corrupt file also counts); no statistics change. How
  // a caller chooses between waiting for a cheap load and compiling apart.
  bool has(const CacheKey& key) const;

  // How many keys a get_or_compile of this process is compiling or waiting
  // on now.
  size_t compiles_in_flight() const;

  // Counts an L1 request and hit served by a caller's own in-process map in
  // front of this cache (the program cache keeps ready Executables there).
  void count_l1_hit(const std::string& kind);

  // This process's per-kind counts, added to the ones the L3 directory
  // keeps over runs (a file beside its entries, written atomically under a
  // lock); how `kiln cache stats` reports hits and compile seconds. Nothing
  // happens when L3 is off. Call once, at the end of a run.
  void record_run_stats();
  // The per-kind counts L3 keeps (empty when it is off or holds none).
  std::map<std::string, KindStats> recorded_stats() const;

  CacheStats stats() const;
  void reset_stats();
  // Empties the chosen tiers (for L2/L3: every file the cache made there).
  void clear(bool l1, bool l2, bool l3);

  std::string l2_dir() const;  // "" when the tier is off
  std::string l3_dir() const;
  // Why an off disk tier is off ("" when it is on).
  std::string disabled_reason(CacheTier tier) const;
  // What a disk tier holds now (all processes' entries); zeros when it is off.
  CacheDir::Usage disk_usage(CacheTier tier) const;
  // The bound on a tier's entries (see the top of this file).
  int64_t max_bytes(CacheTier tier) const;

 private:
  struct DiskTier {
    std::optional<CacheDir> dir;
    std::string why_off;
    int64_t estimate = -1;  // under mu_: the entries' bytes as last seen plus this process's writes; -1 unknown
  };
  const DiskTier& disk(CacheTier t) const { return t == CacheTier::l2 ? l2_ : l3_; }
  DiskTier& disk(CacheTier t) { return t == CacheTier::l2 ? l2_ : l3_; }
  // After `name` (`bytes`) was published in tier t: trims the tier when its
  // entries may have crossed its bound.
  void trim_if_full(CacheTier t, const std::string& name, int64_t bytes);
  // Under mu_: counts into tier `t` of the totals and of `kind`.
  void count(CacheTier t, const std::string& kind, const std::function<void(TierStats&)>& add);
  // Under mu_: the L1 payload, counting a request and a hit and marking it
  // used, or null (nothing counted).
  const std::string* l1_hit(const std::string& name);
  std::optional<std::string> lookup_l1(const std::string& name);
  std::optional<std::string> lookup_disk(CacheTier t, const CacheKey& key, const std::string& name);
  // The disk lookups after an L1 miss, promoting a hit; `hit` names its tier.
  std::optional<std::string> lookup_disks(const CacheKey& key, const std::string& name,
                                          const char** hit = nullptr);
  void store(const CacheKey& key, const std::string& name, const std::string& payload, bool l2, bool l3);
  // Prints `message` on stderr the first time `topic` comes up in this process.
  void say_once(const std::string& topic, const std::string& message);

  Options options_;
  DiskTier l2_, l3_;
  mutable std::mutex mu_;  // guards everything below
  LruMap<std::string, std::string> l1_;  // payloads by entry name, weighed by size
  std::unordered_map<std::string, std::shared_ptr<std::mutex>> compiling_;  // per entry name
  std::set<std::string> said_;
  CacheStats stats_;
};

}  // namespace kiln
