// `kiln numerics-check` as a user runs it: a rung of the ladder is
// bit-identical to strict eager; bf16 compute differs materially (exit 2);
// a missing --candidate is a one-line error.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

class NumericsCheckE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_.path();
    write_grammar_corpus((root_ / "corpus.txt").string());
  }

  CliRun check(const std::string& candidate) {
    return run_cli("numerics-check --config llama3_debug --data.path " +
                   (root_ / "corpus.txt").string() +
                   " --data.text_split line --training.seq_len 32 --job.dump_folder " +
                   root_.string() + " --candidate \"" + candidate + "\"");
  }

  TempDir temp_;
  fs::path root_;
};

TEST_F(NumericsCheckE2E, GraphTrainerIsBitIdentical) {
  CliRun r = check("--compile.graph_trainer");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("verdict:   bit-identical"), std::string::npos) << r.output;
}

TEST_F(NumericsCheckE2E, Bf16ComputeDiffersMaterially) {
  CliRun r = check("--training.mixed_precision_param=bfloat16");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("verdict:   differ materially"), std::string::npos) << r.output;
}

TEST_F(NumericsCheckE2E, MissingCandidateIsAnError) {
  CliRun r = run_cli("numerics-check --config llama3_debug");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("needs --candidate"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test
