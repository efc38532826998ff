// Checks on the Chrome traces `kiln train --profiler.enable_profiling`
// writes, shared by the single-process and multi-process profiler tests.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::test {

nlohmann::json read_trace(const std::string& path);
// The complete ("X") events of category `cat` ("" for all).
std::vector<nlohmann::json> trace_spans(const nlohmann::json& trace, const std::string& cat = "");
// Every thread's spans nest: two spans of one thread are disjoint or one
// contains the other.
void expect_spans_nest(const nlohmann::json& trace);
// Every kernel span a program launched (its "program" argument) lies inside
// a span of that program on its thread. Returns the share of kernel spans
// that programs launched (the rest ran eagerly).
double expect_kernels_inside_programs(const nlohmann::json& trace);

}  // namespace kiln::test
