// A profile capture as Chrome trace-event JSON, the format Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one process per rank, one
// track per thread, spans as complete events ("X") with their arguments,
// collectives' start-to-wait arrows as flow events. Times are microseconds
// from the capture's start.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/base/profile.h"

namespace kiln {

nlohmann::json chrome_trace(const profile::Capture& capture, int pid,
                            const std::string& process_name);
// Writes chrome_trace() to `path` atomically, creating its folder.
void write_chrome_trace(const std::string& path, const profile::Capture& capture, int pid,
                        const std::string& process_name);

}  // namespace kiln
