// Helpers for tests that run `kiln train`: a small corpus on which the loss
// falls within a few steps, and the run's <dump_folder>/metrics.jsonl.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::test {

// Writes `lines` sentences from a tiny grammar (a fixed LCG picks the
// words), one per line, to `path`: enough structure that the loss falls
// within a few steps, the same text on every run.
void write_grammar_corpus(const std::string& path, int lines = 3000);

// The objects of <dump>/metrics.jsonl, one per logged step, in order.
std::vector<nlohmann::json> read_metrics(const std::string& dump);
// Their "loss" values.
std::vector<double> read_losses(const std::string& dump);

}  // namespace kiln::test
