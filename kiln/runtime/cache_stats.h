// The compile cache's counters, per tier and per kind of artifact, and the
// text they are kept in across runs (CompileCache::record_run_stats): one
// line per kind and tier,
//   <kind> <tier> <requests> <hits> <misses> <bytes read> <bytes written> <compile seconds>
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace kiln {

enum class CacheTier { l1, l2, l3 };
const char* cache_tier_name(CacheTier t);  // "l1", "l2", "l3"

// Per tier and per process. A request is one lookup that reached the tier;
// bytes count payloads; compile_seconds is charged to the slowest enabled tier
// (the one that missed last before compiling).
struct TierStats {
  int64_t requests = 0, hits = 0, misses = 0, bytes_read = 0, bytes_written = 0;
  double compile_seconds = 0;
};

struct KindStats {
  TierStats l1, l2, l3;
  TierStats& tier(CacheTier t) { return t == CacheTier::l1 ? l1 : t == CacheTier::l2 ? l2 : l3; }
  const TierStats& tier(CacheTier t) const { return const_cast<KindStats*>(this)->tier(t); }
};

struct CacheStats {
  TierStats l1, l2, l3;
  int64_t corrupt_entries = 0;
  // The same counts per kind of artifact ("program", "cpu_fused_so", ...).
  std::map<std::string, KindStats> kinds;
};

// Adds `b`'s counts into `a` (saturating at the largest count).
void add_stats(TierStats& a, const TierStats& b);

std::string format_run_stats(const std::map<std::string, KindStats>& kinds);
// Lines that do not parse, or hold a negative count or seconds outside
// [0, 1e12], are skipped: the file is only ever advice. Of two lines for one
// kind and tier the later counts.
std::map<std::string, KindStats> parse_run_stats(std::string_view text);

}  // namespace kiln
