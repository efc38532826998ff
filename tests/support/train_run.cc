#include "tests/support/train_run.h"

#include <cstdint>
#include <fstream>

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

}  // namespace kiln::test
