#include "tests/support/train_run.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"

namespace kiln::test {

void write_grammar_corpus(const std::string& path, int lines) {
  const char* subjects[] = {"the cat",     "a dog",      "my friend",
                            "the old man", "her sister", "the bird"};
  const char* verbs[] = {"sees", "likes", "finds", "follows", "watches", "calls"};
  const char* objects[] = {"the garden", "a small house", "the river",
                           "his book",   "the red ball",  "the moon"};
  const char* endings[] = {"every day.", "at night.", "in the morning.",
                           "again.",     "with joy.", "slowly."};
  std::ofstream f(path);
  uint64_t s = 12345;
  auto pick = [&](int n) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return int((s >> 33) % uint64_t(n));
  };
  for (int i = 0; i < lines; ++i)
    f << subjects[pick(6)] << " " << verbs[pick(6)] << " " << objects[pick(6)] << " "
      << endings[pick(6)] << "\n";
}

std::vector<nlohmann::json> read_metrics(const std::string& dump) {
  std::ifstream f(dump + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

Curve read_curve(const std::string& dump) {
  Curve c;
  for (const auto& j : read_metrics(dump)) {
    c.loss.push_back(j["loss"].get<double>());
    c.grad_norm.push_back(j["grad_norm"].get<double>());
    if (j.contains("val_loss")) c.val_loss.push_back(j["val_loss"].get<double>());
    if (j.contains("mem_peak_bytes")) c.mem_peak.push_back(j["mem_peak_bytes"].get<int64_t>());
  }
  return c;
}

std::vector<double> read_losses(const std::string& dump) {
  std::vector<double> out;
  for (const auto& j : read_metrics(dump)) out.push_back(j["loss"].get<double>());
  return out;
}

namespace {

// The processes of session `sid` (from /proc).
std::vector<pid_t> session_processes(pid_t sid) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // pid (comm) state ppid pgrp session ...; comm may hold spaces, so after the last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0, pgrp = 0, session = 0;
    if (rest >> state >> ppid >> pgrp >> session && session == sid && state != "Z")
      out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

}  // namespace

int run_cli_until(const std::string& args, const std::string& log,
                  const std::function<bool()>& stop, int sig, const std::string& launcher) {
  const char* cli = std::getenv("KILN_CLI");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();  // session and process group `pid`: what a terminal's job is
    std::string cmd =
        "exec " + launcher + " " + std::string(cli) + " " + args + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  int status;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;  // finished before the signal
    if (stop() || std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, sig);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Every process of the run (a launcher's ranks, in process groups of
  // their own) ends with it: one alive a second later is a defect (an
  // orphan would go on writing into the run's folder).
  const auto ended = std::chrono::steady_clock::now();
  std::vector<pid_t> left;
  while (!(left = session_processes(pid)).empty() &&
         std::chrono::steady_clock::now() < ended + std::chrono::seconds(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!left.empty()) {
    ADD_FAILURE() << left.size() << " processes of `" << args << "` outlived it by 1 s";
    for (pid_t p : left) ::kill(p, SIGKILL);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int kill_repeatedly(const std::string& args, const std::string& dump, int64_t steps,
                    int64_t run_ms, const std::string& launcher,
                    const std::function<void()>& after_each) {
  std::mt19937 rng(2026);
  // A later run often goes faster than the timed one (its kernels cached,
  // a lighter machine): kills within a sixth of it still land several times.
  std::uniform_int_distribution<int64_t> after_ms(run_ms / 20, run_ms / 6);
  int killed = 0;
  for (int round = 0; round < 20 && last_logged_step(dump) < steps; ++round) {
    const auto at = std::chrono::steady_clock::now() + std::chrono::milliseconds(after_ms(rng));
    int status = run_cli_until(
        args, dump + ".round.log", [&] { return std::chrono::steady_clock::now() >= at; },
        SIGKILL, launcher);
    if (status == 128 + SIGKILL) ++killed;
    after_each();
  }
  return killed;
}

void expect_sigkills_lose_nothing(const std::function<std::string(const std::string&)>& args,
                                  const std::string& dir, int64_t steps,
                                  const std::string& launcher) {
  const std::string whole = dir + "/whole", cut = dir + "/cut", tmp = dir + "/tmp";
  std::filesystem::create_directories(tmp);
  const std::string launch = "env TMPDIR=" + tmp + " " + launcher;
  const auto t0 = std::chrono::steady_clock::now();
  CliRun first = run_cli(args(whole), launch);
  ASSERT_EQ(first.status, 0) << first.output;
  const int64_t run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
  const std::vector<double> want = read_losses(whole);
  ASSERT_EQ(want.size(), size_t(steps));
  // A loaded machine can make the timed run slow and the cut ones finish
  // before enough kills land: the cut run then starts over, killed sooner.
  int killed = 0;
  for (int attempt = 0; attempt < 3 && killed < 3; ++attempt) {
    std::filesystem::remove_all(cut);
    killed = kill_repeatedly(args(cut), cut, steps, run_ms >> attempt, launch, [&] {
      // Whatever the kill left, every checkpoint listed is whole.
      const train::CheckpointManager checkpoints(cut + "/checkpoint");
      for (int64_t s : checkpoints.steps())
        EXPECT_NO_THROW(checkpoints.load(s)) << "step " << s;
    });
  }
  EXPECT_GE(killed, 3) << "too few kills landed to test anything";
  CliRun last = run_cli(args(cut), launch);
  ASSERT_EQ(last.status, 0) << last.output;
  EXPECT_EQ(read_losses(cut), want);
}

std::string debug_train_args(const std::string& corpus, const std::string& dump, int steps,
                             const std::string& extra) {
  return "train --config llama3_debug --data.path " + corpus +
         " --data.text_split line --job.dump_folder " + dump + " --training.steps " +
         std::to_string(steps) + " --training.seq_len 32 --metrics.log_freq 1 " + extra;
}

int64_t last_logged_step(const std::string& dump) {
  std::ifstream f(dump + "/metrics.jsonl");
  int64_t last = 0;
  for (std::string line; std::getline(f, line);)
    if (auto j = nlohmann::json::parse(line, nullptr, false); j.is_object() && j.contains("step"))
      last = j["step"].get<int64_t>();
  return last;
}

}  // namespace kiln::test
