#include "tests/support/trace_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

namespace kiln::test {

using nlohmann::json;

namespace {

// Times are doubles of microseconds: allow their rounding.
constexpr double kSlack = 0.01;

double end_of(const json& e) { return e["ts"].get<double>() + e["dur"].get<double>(); }

std::map<int64_t, std::vector<json>> by_thread(const std::vector<json>& spans) {
  std::map<int64_t, std::vector<json>> m;
  for (const json& e : spans) m[e["tid"].get<int64_t>()].push_back(e);
  for (auto& [tid, v] : m)
    std::sort(v.begin(), v.end(), [](const json& a, const json& b) {
      return a["ts"] != b["ts"] ? a["ts"].get<double>() < b["ts"].get<double>()
                                : a["dur"].get<double>() > b["dur"].get<double>();
    });
  return m;
}

}  // namespace

json read_trace(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  json j = json::parse(in, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  EXPECT_TRUE(j.contains("traceEvents")) << path;
  return j;
}

std::vector<json> trace_spans(const json& trace, const std::string& cat) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && (cat.empty() || e["cat"] == cat)) out.push_back(e);
  return out;
}

void expect_spans_nest(const json& trace) {
  for (const auto& [tid, spans] : by_thread(trace_spans(trace))) {
    std::vector<json> open;
    for (const json& e : spans) {
      while (!open.empty() && end_of(open.back()) <= e["ts"].get<double>() + kSlack)
        open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end_of(e), end_of(open.back()) + kSlack)
            << "thread " << tid << ": " << e.dump() << " overlaps " << open.back().dump();
      }
      open.push_back(e);
    }
  }
}

double expect_kernels_inside_programs(const json& trace) {
  auto programs = by_thread(trace_spans(trace, "program"));
  std::vector<json> kernels = trace_spans(trace, "kernel");
  size_t launched = 0;
  for (const json& k : kernels) {
    if (!k.contains("args") || !k["args"].contains("program")) continue;
    ++launched;
    const auto& mine = programs[k["tid"].get<int64_t>()];
    bool inside = std::any_of(mine.begin(), mine.end(), [&](const json& p) {
      return p["name"] == k["args"]["program"] &&
             p["ts"].get<double>() <= k["ts"].get<double>() + kSlack &&
             end_of(k) <= end_of(p) + kSlack;
    });
    EXPECT_TRUE(inside) << "kernel span outside its program's span: " << k.dump();
  }
  return kernels.empty() ? 0.0 : double(launched) / double(kernels.size());
}

}  // namespace kiln::test
