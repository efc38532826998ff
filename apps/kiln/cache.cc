// `kiln cache stats|clear`: what the compile cache holds on disk, the hits
// and compile seconds per kind and tier that runs recorded there
// (CompileCache::record_run_stats), and emptying it.
#include <cstdio>
#include <iomanip>
#include <map>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "apps/kiln/commands.h"
#include "kiln/base/bytes.h"
#include "kiln/runtime/compile_cache.h"

namespace kiln::cli {
namespace {

// "<label><dir>: N entries, SIZE" or "<label>off (<why>)"; returns the
// tier's stale entries.
int64_t print_tier_line(CompileCache& cache, CacheTier tier, const char* label) {
  std::string dir = tier == CacheTier::l2 ? cache.l2_dir() : cache.l3_dir();
  std::cout << label;
  if (dir.empty()) {
    std::cout << "off (" << cache.disabled_reason(tier) << ")\n";
    return 0;
  }
  CacheDir::Usage u = cache.disk_usage(tier);
  std::cout << dir << ": " << u.entries << (u.entries == 1 ? " entry, " : " entries, ") << bytes_text(u.bytes)
            << " of at most " << bytes_text(double(cache.max_bytes(tier)));
  if (u.stale || u.corrupt) std::cout << " (" << u.stale << " stale, " << u.corrupt << " corrupt)";
  std::cout << "\n";
  return u.stale;
}

// Per kind (programs, each backend's kernels): hits of requests per tier and
// compile seconds, over the runs recorded since the last clear.
void print_recorded_stats(const std::map<std::string, KindStats>& kinds) {
  if (kinds.empty()) {
    std::cout << "recorded runs: none (kiln train records its lookups in L3 when it ends)\n";
    return;
  }
  std::cout << "recorded runs (hits/requests per tier, compile seconds):\n";
  for (const auto& [kind, k] : kinds) {
    double seconds = 0;
    std::cout << "  " << std::left << std::setw(14) << kind << std::right;
    for (CacheTier t : {CacheTier::l1, CacheTier::l2, CacheTier::l3}) {
      const TierStats& s = k.tier(t);
      seconds += s.compile_seconds;
      std::cout << "  " << cache_tier_name(t) << " " << s.hits << "/" << s.requests;
    }
    std::cout << "  compiled " << std::fixed << std::setprecision(3) << seconds << " s\n"
              << std::defaultfloat;
  }
}

}  // namespace

void add_cache(CLI::App& app) {
  auto* cmd = app.add_subcommand("cache", "Inspect or empty the compile cache on disk");
  cmd->require_subcommand(1);

  auto* stats = cmd->add_subcommand("stats", "Print the cache directories and what they hold");
  stats->callback([] {
    CompileCache& cache = CompileCache::instance();
    EntryIdentity id = build_identity();
    std::cout << "kiln compile cache (kiln " << id.kiln_version << ", " << id.compiler << ", build "
              << (id.build.empty() ? "unknown" : id.build.substr(0, 12)) << ")\n"
              << "L1 in-process:  at most " << bytes_text(double(cache.max_bytes(CacheTier::l1)))
              << " in each process\n";
    int64_t stale = print_tier_line(cache, CacheTier::l2, "L2 host-local:  ") +
                    print_tier_line(cache, CacheTier::l3, "L3 persistent:  ");
    if (stale)
      std::cout << "stale entries come from another kiln version, compiler or build and are never "
                   "used (`kiln cache clear --stale` removes them)\n";
    print_recorded_stats(cache.recorded_stats());
  });

  auto* clear = cmd->add_subcommand("clear", "Delete the cache's entries (both tiers unless one is named)");
  struct ClearFlags {
    bool l2 = false, l3 = false, stale = false;
  };
  auto flags = std::make_shared<ClearFlags>();
  clear->add_flag("--l2", flags->l2, "Clear the host-local tier (L2)");
  clear->add_flag("--l3", flags->l3, "Clear the persistent tier (L3)");
  clear->add_flag("--stale", flags->stale,
                  "Delete only the entries this build cannot use (another kiln version, compiler or "
                  "build; corrupt)");
  clear->callback([flags] {
    CompileCache& cache = CompileCache::instance();
    bool both = !flags->l2 && !flags->l3;
    for (auto [tier, chosen, label] : {std::tuple{CacheTier::l2, flags->l2 || both, "L2"},
                                       std::tuple{CacheTier::l3, flags->l3 || both, "L3"}}) {
      std::string dir = tier == CacheTier::l2 ? cache.l2_dir() : cache.l3_dir();
      if (!chosen) continue;
      if (dir.empty()) {
        std::cout << label << " off (" << cache.disabled_reason(tier) << "): nothing to remove\n";
        continue;
      }
      CacheDir::Usage removed =
          flags->stale ? CacheDir(dir).clear_unusable(build_identity()) : CacheDir(dir).clear();
      std::cout << label << " " << dir << ": removed " << removed.entries
                << (flags->stale ? " unusable" : "") << (removed.entries == 1 ? " entry, " : " entries, ")
                << bytes_text(removed.bytes) << "\n";
    }
  });
}

}  // namespace kiln::cli
