#include "kiln/runtime/cache_stats.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace kiln {

const char* cache_tier_name(CacheTier t) {
  return t == CacheTier::l1 ? "l1" : t == CacheTier::l2 ? "l2" : "l3";
}

namespace {

// Counts are never negative; a sum past the largest count stays there.
void add_count(int64_t& a, int64_t b) { a = b > INT64_MAX - a ? INT64_MAX : a + b; }

}  // namespace

void add_stats(TierStats& a, const TierStats& b) {
  add_count(a.requests, b.requests), add_count(a.hits, b.hits), add_count(a.misses, b.misses);
  add_count(a.bytes_read, b.bytes_read), add_count(a.bytes_written, b.bytes_written);
  a.compile_seconds += b.compile_seconds;
}

std::string format_run_stats(const std::map<std::string, KindStats>& kinds) {
  std::ostringstream os;
  os.precision(17);
  for (const auto& [kind, k] : kinds)
    for (CacheTier t : {CacheTier::l1, CacheTier::l2, CacheTier::l3}) {
      const TierStats& s = k.tier(t);
      os << kind << ' ' << cache_tier_name(t) << ' ' << s.requests << ' ' << s.hits << ' '
         << s.misses << ' ' << s.bytes_read << ' ' << s.bytes_written << ' ' << s.compile_seconds
         << '\n';
    }
  return os.str();
}

std::map<std::string, KindStats> parse_run_stats(std::string_view text) {
  std::map<std::string, KindStats> kinds;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, tier, rest;
    TierStats s;
    if (!(fields >> kind >> tier >> s.requests >> s.hits >> s.misses >> s.bytes_read >>
          s.bytes_written >> s.compile_seconds) ||
        (fields >> rest))
      continue;
    if (std::min({s.requests, s.hits, s.misses, s.bytes_read, s.bytes_written}) < 0 ||
        !(s.compile_seconds >= 0 && s.compile_seconds <= 1e12))
      continue;
    for (CacheTier t : {CacheTier::l1, CacheTier::l2, CacheTier::l3})
      if (tier == cache_tier_name(t)) kinds[kind].tier(t) = s;  // a repeated line: the last
  }
  return kinds;
}

}  // namespace kiln
