// The compile cache's run statistics (runtime/cache_stats.h), a file in the
// L3 directory any process may have written: what parses prints back to text
// that parses to the same counts.
#include "kiln/runtime/cache_stats.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

bool same(const kiln::TierStats& a, const kiln::TierStats& b) {
  return a.requests == b.requests && a.hits == b.hits && a.misses == b.misses &&
         a.bytes_read == b.bytes_read && a.bytes_written == b.bytes_written &&
         a.compile_seconds == b.compile_seconds;
}

}  // namespace

KILN_FUZZ_TARGET(input) {
  auto kinds = kiln::parse_run_stats(kiln::fuzz::as_text(input));
  auto again = kiln::parse_run_stats(kiln::format_run_stats(kinds));
  kiln::fuzz::check(again.size() == kinds.size(), "a kind was lost printing the statistics");
  for (const auto& [kind, k] : kinds) {
    kiln::fuzz::check(again.count(kind) == 1, "a kind was lost printing the statistics");
    for (kiln::CacheTier t : {kiln::CacheTier::l1, kiln::CacheTier::l2, kiln::CacheTier::l3}) {
      kiln::fuzz::check(same(k.tier(t), again.at(kind).tier(t)), "counts changed printing them");
      kiln::TierStats sum = k.tier(t);
      kiln::add_stats(sum, again.at(kind).tier(t));  // saturates, never overflows
    }
  }
}
