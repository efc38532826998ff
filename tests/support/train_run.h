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
// A run's metrics.jsonl, per logged step.
struct Curve {
  std::vector<double> loss, grad_norm;
  std::vector<double> val_loss;   // the steps that validated
  std::vector<int64_t> mem_peak;  // mem_peak_bytes
  std::string output;             // what the run printed, where the test kept it
};
Curve read_curve(const std::string& dump);

// Starts `<launcher> $KILN_CLI <args>` (output to `log`) as a session and
// process group of its own, polls `stop` every 5 ms and, when it says so
// (or after 5 minutes), sends `sig` to the group, as a terminal's Ctrl-C
// does (mpirun gets it; its ranks, in groups of their own, do not). Returns
// once every process of the session is gone (a test failure when one
// outlives the run by 1 s), with the exit status: 128 + n for a process
// ended by signal n; the process's own status when it finished first.
int run_cli_until(const std::string& args, const std::string& log,
                  const std::function<bool()>& stop, int sig, const std::string& launcher = "");
// Runs `<launcher> $KILN_CLI <args>` (writing to <dump>) again and again,
// SIGKILLing it (run_cli_until) at a random moment of the first third of
// `run_ms` (an uninterrupted run's length on this machine; a fixed seed),
// until <dump>/metrics.jsonl reaches `steps` or 20 rounds have run, calling
// `after_each()` after each round. Returns how many rounds a kill ended.
int kill_repeatedly(const std::string& args, const std::string& dump, int64_t steps,
                    int64_t run_ms, const std::string& launcher,
                    const std::function<void()>& after_each);
// The kill-loop test: `args(dump)` runs uninterrupted into <dir>/whole
// (timed), then again and again into <dir>/cut under kill_repeatedly, every
// checkpoint listed loading after each round, then once more to the end:
// the losses must equal the uninterrupted run's, bit for bit, and at least
// 3 kills must have landed. The runs' temporary files (TMPDIR), which a kill
// leaves behind, go to <dir>/tmp.
void expect_sigkills_lose_nothing(const std::function<std::string(const std::string&)>& args,
                                  const std::string& dir, int64_t steps,
                                  const std::string& launcher = "");
// `kiln train` arguments: the llama3 debug recipe on `corpus`'s lines
// (write_grammar_corpus), `steps` steps of 32 tokens, every step logged,
// into `dump`, then `extra`.
std::string debug_train_args(const std::string& corpus, const std::string& dump, int steps,
                             const std::string& extra);
// The last step <dump>/metrics.jsonl records (0 for none).
int64_t last_logged_step(const std::string& dump);

}  // namespace kiln::test
