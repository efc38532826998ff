#include "kiln/io/trace_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "kiln/base/error.h"

namespace kiln {
namespace {

using nlohmann::json;

struct Span {
  double begin, end;
  bool communication;
};

double number(const json& e, const char* key, size_t index) {
  KILN_CHECK(e.contains(key) && e[key].is_number(), "trace event ", index, " (\"",
             e.value("name", std::string("?")), "\") has no numeric '", key, "'");
  return e[key].get<double>();
}

// pid and tid: integers, 0 when absent.
int64_t integer(const json& e, const char* key) {
  if (!e.contains(key)) return 0;
  KILN_CHECK(e[key].is_number_integer(), "a trace event's '", key, "' is not an integer");
  return e[key].get<int64_t>();
}

double arg_number(const json& e, const char* key) {
  if (!e.contains("args") || !e["args"].contains(key) || !e["args"][key].is_number()) return 0;
  return e["args"][key].get<double>();
}

// Total length of [a, b) covered by `intervals` (sorted, disjoint).
double covered(const std::vector<std::pair<double, double>>& intervals, double a, double b) {
  double total = 0;
  for (auto [x, y] : intervals) total += std::max(0.0, std::min(b, y) - std::max(a, x));
  return total;
}

std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (auto [a, b] : v)
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  return out;
}

}  // namespace

namespace {

TraceSummary summarize(const json& trace) {
  KILN_CHECK(trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array(),
             "not a Chrome trace: no \"traceEvents\" array");
  const json& events = trace["traceEvents"];
  auto track = [](const json& e) { return std::pair{integer(e, "pid"), integer(e, "tid")}; };
  std::map<std::pair<int64_t, int64_t>, std::string> names;
  for (const json& e : events)
    if (e.is_object() && e.value("ph", "") == "M" && e.value("name", "") == "thread_name" &&
        e.contains("args") && e["args"].is_object())
      names[track(e)] = e["args"].value("name", "");

  TraceSummary s;
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> device;  // per device queue track
  std::vector<std::pair<double, double>> steps;
  std::map<std::string, OpTime> ops;
  double first = 1e300, last = -1e300;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    KILN_CHECK(e.is_object(), "trace event ", i, " is not an object");
    if (e.value("ph", "") != "X") continue;
    double ts = number(e, "ts", i), dur = number(e, "dur", i);
    KILN_CHECK(dur >= 0, "trace event ", i, " has a negative 'dur' (", dur, ")");
    first = std::min(first, ts);
    last = std::max(last, ts + dur);
    const std::string cat = e.value("cat", "");
    if (cat == "step") {
      steps.push_back({ts, ts + dur});
      ++s.steps;
    }
    auto name = names.find(track(e));
    if (name == names.end() || name->second.rfind("device queue", 0) != 0) continue;
    device[track(e)].push_back({ts, ts + dur, cat == "comm"});
    if (cat != "kernel" && cat != "comm") continue;
    OpTime& op = ops[e.value("name", "?")];
    op.name = e.value("name", "?");
    ++op.calls;
    op.total_us += dur;
    op.flops += arg_number(e, "flops");
    op.bytes += arg_number(e, "bytes");
  }
  KILN_CHECK(!device.empty(), "the trace has no device queue track with spans (kiln's profiler "
             "names it \"device queue <device>\"): nothing ran on a device while it recorded");

  double w0 = first, w1 = last;
  if (trace.contains("otherData") && trace["otherData"].contains("capture_us")) {
    w0 = std::min(w0, 0.0);
    w1 = std::max(w1, trace["otherData"]["capture_us"].get<double>());
  }
  s.window_us = w1 - w0;

  // The busiest device queue.
  auto busy = [](const std::vector<Span>& v) {
    std::vector<std::pair<double, double>> iv;
    for (const Span& x : v) iv.push_back({x.begin, x.end});
    return covered(merged(iv), -1e300, 1e300);
  };
  auto best = device.begin();
  for (auto it = device.begin(); it != device.end(); ++it)
    if (busy(it->second) > busy(best->second)) best = it;
  s.device_thread = names[best->first];

  // Sweep the track: each instant goes to the innermost span covering it.
  std::vector<Span> spans = best->second;
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  const auto step_time = merged(steps);
  std::vector<Span> open;
  double pos = w0;
  auto attribute = [&](double upto) {
    if (upto <= pos) return;
    if (open.empty()) {
      double host = covered(step_time, pos, upto);
      s.host_gap_us += host;
      s.idle_us += upto - pos - host;
    } else {
      (open.back().communication ? s.communication_us : s.compute_us) += upto - pos;
    }
    pos = upto;
  };
  for (Span x : spans) {
    while (!open.empty() && open.back().end <= x.begin) {
      attribute(open.back().end);
      open.pop_back();
    }
    attribute(x.begin);
    if (!open.empty()) x.end = std::min(x.end, open.back().end);  // keep them nested
    open.push_back(x);
  }
  while (!open.empty()) {
    attribute(open.back().end);
    open.pop_back();
  }
  attribute(w1);

  for (auto& [name, op] : ops) s.ops.push_back(op);
  std::sort(s.ops.begin(), s.ops.end(),
            [](const OpTime& a, const OpTime& b) { return a.total_us > b.total_us; });
  return s;
}

}  // namespace

TraceSummary summarize_trace(const json& trace) {
  try {
    return summarize(trace);
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    fail("a malformed trace event: ", e.what());
  }
}

std::string format_summary(const TraceSummary& s, size_t top) {
  auto pct = [&](double us) { return s.window_us > 0 ? 100 * us / s.window_us : 0.0; };
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "%lld steps in %.3f ms, on the %s track\n",
                static_cast<long long>(s.steps), s.window_us / 1e3, s.device_thread.c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "time: compute %.1f%%, communication %.1f%%, host gaps %.1f%%, idle %.1f%%\n",
                pct(s.compute_us), pct(s.communication_us), pct(s.host_gap_us), pct(s.idle_us));
  out += line;
  std::snprintf(line, sizeof line, "%-34s %7s %10s %7s %9s %9s\n", "op", "calls", "total ms",
                "share", "GFLOP/s", "GB/s");
  out += line;
  for (size_t i = 0; i < std::min(top, s.ops.size()); ++i) {
    const OpTime& op = s.ops[i];
    double seconds = op.total_us / 1e6;
    std::snprintf(line, sizeof line, "%-34s %7lld %10.3f %6.1f%% %9.2f %9.2f\n",
                  op.name.substr(0, 34).c_str(), static_cast<long long>(op.calls),
                  op.total_us / 1e3, pct(op.total_us), seconds > 0 ? op.flops / seconds / 1e9 : 0,
                  seconds > 0 ? op.bytes / seconds / 1e9 : 0);
    out += line;
  }
  return out;
}

nlohmann::json summary_json(const TraceSummary& s) {
  json ops = json::array();
  for (const OpTime& op : s.ops)
    ops.push_back({{"name", op.name}, {"calls", op.calls}, {"total_us", op.total_us},
                   {"flops", op.flops}, {"bytes", op.bytes}});
  return {{"device_thread", s.device_thread}, {"steps", s.steps}, {"window_us", s.window_us},
          {"compute_us", s.compute_us}, {"communication_us", s.communication_us},
          {"host_gap_us", s.host_gap_us}, {"idle_us", s.idle_us}, {"ops", ops}};
}

}  // namespace kiln
