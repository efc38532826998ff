// The profiler's event log: spans, instants and flow arrows recorded per
// thread while a capture is on (the trainer's --profiler.enable_profiling
// turns one on for a few steps). With no capture on, every hook is one
// relaxed atomic load and a branch, so the instrumented code costs nothing
// measurable (bench/profiler_overhead.sh).
//
// Categories name what a span is; the summary (kiln/io/trace_summary.h)
// attributes time by them: "program", "kernel", "comm", "compile", "data",
// "checkpoint", "step".
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::profile {

using ArgValue = std::variant<int64_t, double, std::string>;

struct Event {
  char phase = 'X';  // 'X' span, 'i' instant, 's' flow start, 'f' flow end
  std::string category, name;
  double ts_us = 0, dur_us = 0;  // since the process's profile epoch
  uint64_t flow_id = 0;          // for 's' and 'f'
  uint32_t thread = 0;           // a small per-process thread number
  std::vector<std::pair<std::string, ArgValue>> args;
};

struct Capture {
  std::vector<Event> events;                 // per thread in order of recording
  std::map<uint32_t, std::string> threads;   // thread number -> its name
  double start_us = 0, stop_us = 0;
};

namespace detail {
extern std::atomic<bool> g_active;
extern std::atomic<uint64_t> g_generation;
}  // namespace detail

// True while a capture is on.
inline bool active() { return detail::g_active.load(std::memory_order_relaxed); }

// Microseconds since the profile epoch (steady clock).
double now_us();

// Names the calling thread in traces ("device queue cpu:0", "compile pool").
void set_thread_name(std::string name);

// Begins a capture (an error if one is on); events recorded before are gone.
void start();
// Ends the capture and returns what every thread recorded during it. A span
// still open at the stop is not in it.
Capture stop();

// Records one event on the calling thread (a no-op with no capture on).
void record(Event e);

// A span from construction to destruction on the calling thread.
class Span {
 public:
  Span(std::string_view category, std::string_view name) {
    if (active()) begin(category, name);
  }
  ~Span() {
    if (on_) end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool on() const { return on_; }
  // Adds an argument shown with the span (ignored when the span is off).
  void arg(std::string key, ArgValue value) {
    if (on_) event_.args.emplace_back(std::move(key), std::move(value));
  }

 private:
  void begin(std::string_view category, std::string_view name);
  void end();

  bool on_ = false;
  uint64_t generation_ = 0;
  Event event_;
};

// A flow arrow from where it starts to where it ends (a collective's start
// to its wait); each end binds to the span enclosing it on its thread.
uint64_t new_flow_id();
void flow(char phase, uint64_t id, std::string_view category, std::string_view name);

}  // namespace kiln::profile
