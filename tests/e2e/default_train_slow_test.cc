// `kiln train` with no arguments, as a new user runs it: the default recipe
// on the default corpus shows the loss falling, saves a checkpoint, and
// `kiln generate` on it prints text. Minutes on two cores: label slow.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/data/default_corpus.h"
#include "kiln/base/error.h"
#include "tests/support/cli.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

TEST(DefaultTrain, NoArgumentsTrainsAndGenerates) {
  try {
    data::default_corpus();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  fs::path dir = fs::temp_directory_path() / ("kiln_default_train_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string in_dir = "cd " + dir.string() + " &&";
  CliRun r = run_cli("train", in_dir);
  ASSERT_EQ(r.status, 0) << r.output;
  fs::path dump = dir / "outputs" / "default";
  std::ifstream f(dump / "metrics.jsonl");
  std::vector<double> loss;
  for (std::string line; std::getline(f, line);)
    loss.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  ASSERT_GE(loss.size(), 3u) << r.output;
  EXPECT_LT(loss.back(), loss.front() - 1.5) << r.output;
  EXPECT_TRUE(fs::exists(dump / "checkpoint" / "step-200" / "manifest.json")) << r.output;

  CliRun g = run_cli("generate --checkpoint outputs/default --prompt 'The' --max-new-tokens 30",
                     in_dir);
  ASSERT_EQ(g.status, 0) << g.output;
  EXPECT_GT(g.output.size(), 40u) << g.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::test
