#include "tests/support/train_run.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <thread>

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

std::vector<double> read_losses(const std::string& dump) {
  std::vector<double> out;
  for (const auto& j : read_metrics(dump)) out.push_back(j["loss"].get<double>());
  return out;
}

int run_cli_until(const std::string& args, const std::string& log,
                  const std::function<bool()>& stop, int sig) {
  const char* cli = std::getenv("KILN_CLI");
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string cmd = "exec " + std::string(cli) + " " + args + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  int status;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid)  // finished before the signal
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (stop() || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, sig);
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
