#include "kiln/io/chrome_trace.h"

#include <filesystem>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"

namespace kiln {
namespace {

nlohmann::json args_json(const profile::Event& e) {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [key, value] : e.args)
    std::visit([&, &key = key](const auto& v) { args[key] = v; }, value);
  return args;
}

nlohmann::json metadata(const char* what, int pid, int64_t tid, const std::string& name) {
  nlohmann::json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

}  // namespace

nlohmann::json chrome_trace(const profile::Capture& capture, int pid,
                            const std::string& process_name) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", pid, -1, process_name));
  for (const auto& [tid, name] : capture.threads)
    events.push_back(metadata("thread_name", pid, tid, name));
  for (const profile::Event& e : capture.events) {
    nlohmann::json j = {{"ph", std::string(1, e.phase)}, {"cat", e.category}, {"name", e.name},
                        {"ts", e.ts_us - capture.start_us}, {"pid", pid}, {"tid", e.thread}};
    if (e.phase == 'X') j["dur"] = e.dur_us;
    if (e.phase == 's' || e.phase == 'f') j["id"] = e.flow_id;
    if (e.phase == 'f') j["bp"] = "e";  // binds to the span enclosing it
    if (e.phase == 'i') j["s"] = "t";
    if (!e.args.empty()) j["args"] = args_json(e);
    events.push_back(std::move(j));
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"producer", "kiln"}, {"capture_us", capture.stop_us - capture.start_us}}}};
}

void write_chrome_trace(const std::string& path, const profile::Capture& capture, int pid,
                        const std::string& process_name) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  KILN_CHECK(!ec, "cannot create the trace folder ", parent.string(), ": ", ec.message());
  write_file_atomic(path, chrome_trace(capture, pid, process_name).dump());
}

}  // namespace kiln
