// Chrome traces read by `kiln profile summarize` (io/trace_summary.h): a
// trace that summarizes has its capture split into shares that add up to it.
#include <cmath>
#include <nlohmann/json.hpp>

#include "kiln/io/trace_summary.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  nlohmann::json trace = nlohmann::json::parse(kiln::fuzz::as_text(input), nullptr, false);
  if (trace.is_discarded()) return;
  kiln::TraceSummary s = kiln::summarize_trace(trace);
  const double total = s.compute_us + s.communication_us + s.host_gap_us + s.idle_us;
  if (std::isfinite(s.window_us) && std::isfinite(total))
    kiln::fuzz::check(std::abs(total - s.window_us) <= 1e-6 * std::max(1.0, s.window_us),
                      "the shares do not add up to the capture");
  kiln::format_summary(s, 10);
  kiln::summary_json(s).dump();
}
