// `kiln profile summarize TRACE`: what a trace from --profiler.enable_profiling
// says: the shares of compute, communication, host gaps and idle on the
// device queue, and the ops that took the time with their FLOP/s and GB/s.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/kiln/commands.h"
#include "kiln/base/error.h"
#include "kiln/io/trace_summary.h"

namespace kiln::cli {

void add_profile(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Read profiler traces");
  cmd->require_subcommand(1);
  auto* summarize = cmd->add_subcommand(
      "summarize", "Print where a trace's time went and the ops that took it");
  static std::string path;
  static size_t top = 15;
  static bool json = false;
  summarize->add_option("trace", path, "A trace.json written by --profiler.enable_profiling")
      ->required();
  summarize->add_option("--top", top, "How many ops to list (--json lists every op)")->capture_default_str();
  summarize->add_flag("--json", json, "Print the summary as JSON");
  summarize->callback([] {
    std::ifstream in(path);
    KILN_CHECK(in, "cannot open the trace ", path);
    nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    KILN_CHECK(!trace.is_discarded(), path, " is not JSON");
    TraceSummary s;
    try {
      s = summarize_trace(trace);
    } catch (const Error& e) {
      fail(path, ": ", e.what());
    }
    if (json)
      std::cout << summary_json(s).dump(2) << "\n";
    else
      std::cout << path << ": " << format_summary(s, top);
  });
}

}  // namespace kiln::cli
