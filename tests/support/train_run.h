// Helpers for tests that run `kiln train`: a small corpus on which the loss
// falls within a few steps, and the run's <dump_folder>/metrics.jsonl.
#pragma once
#include <cstdint>
#include <functional>
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

// Starts `$KILN_CLI <args>` (output to `log`), polls `stop` every 5 ms and,
// when it says so (or after 5 minutes), sends `sig`. Returns the exit status:
// 128 + n for a process ended by signal n; the process's own status when it
// finished first.
int run_cli_until(const std::string& args, const std::string& log,
                  const std::function<bool()>& stop, int sig);
// The last step <dump>/metrics.jsonl records (0 for none).
int64_t last_logged_step(const std::string& dump);

}  // namespace kiln::test
