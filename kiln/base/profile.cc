#include "kiln/base/profile.h"

#include <memory>
#include <mutex>

#include "kiln/base/error.h"

namespace kiln::profile {
namespace detail {
std::atomic<bool> g_active{false};
std::atomic<uint64_t> g_generation{0};
}  // namespace detail

namespace {

// One thread's events. Its own mutex is taken only while a capture is on
// (uncontended but for the stop), so threads never wait for each other.
struct Buffer {
  std::mutex mu;
  uint32_t thread = 0;
  std::string name;
  std::vector<Event> events;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<Buffer>> buffers;  // kept after their threads exit
  bool capturing = false;
  double start_us = 0;
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: threads may record during exit
  return *r;
}

Buffer& this_thread_buffer() {
  thread_local std::shared_ptr<Buffer> mine = [] {
    auto b = std::make_shared<Buffer>();
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    b->thread = uint32_t(r.buffers.size());
    b->name = cat("thread ", b->thread);
    r.buffers.push_back(b);
    return b;
  }();
  return *mine;
}

const std::chrono::steady_clock::time_point& epoch() {
  static const auto t = std::chrono::steady_clock::now();
  return t;
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch())
      .count();
}

void set_thread_name(std::string name) {
  Buffer& b = this_thread_buffer();
  std::lock_guard lock(b.mu);
  b.name = std::move(name);
}

void start() {
  epoch();
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  KILN_CHECK(!r.capturing, "profiler: a capture is already on");
  for (auto& b : r.buffers) {
    std::lock_guard bl(b->mu);
    b->events.clear();
  }
  r.capturing = true;
  r.start_us = now_us();
  detail::g_generation.fetch_add(1, std::memory_order_relaxed);
  detail::g_active.store(true, std::memory_order_release);
}

Capture stop() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  KILN_CHECK(r.capturing, "profiler: no capture is on");
  detail::g_active.store(false, std::memory_order_release);
  // Spans open now belong to this generation and are dropped at their end.
  detail::g_generation.fetch_add(1, std::memory_order_relaxed);
  r.capturing = false;
  Capture c;
  c.start_us = r.start_us;
  c.stop_us = now_us();
  for (auto& b : r.buffers) {
    std::lock_guard bl(b->mu);
    c.threads[b->thread] = b->name;
    for (Event& e : b->events) c.events.push_back(std::move(e));
    b->events.clear();
  }
  return c;
}

void record(Event e) {
  if (!active()) return;
  Buffer& b = this_thread_buffer();
  e.thread = b.thread;
  std::lock_guard lock(b.mu);
  if (active()) b.events.push_back(std::move(e));
}

void Span::begin(std::string_view category, std::string_view name) {
  on_ = true;
  generation_ = detail::g_generation.load(std::memory_order_relaxed);
  event_.category = category;
  event_.name = name;
  event_.ts_us = now_us();
}

void Span::end() {
  event_.dur_us = now_us() - event_.ts_us;
  if (detail::g_generation.load(std::memory_order_relaxed) != generation_) return;
  record(std::move(event_));
}

uint64_t new_flow_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void flow(char phase, uint64_t id, std::string_view category, std::string_view name) {
  if (!active()) return;
  Event e;
  e.phase = phase;
  e.category = category;
  e.name = name;
  e.ts_us = now_us();
  e.flow_id = id;
  record(std::move(e));
}

}  // namespace kiln::profile
