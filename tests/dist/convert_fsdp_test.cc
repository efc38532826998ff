// `kiln convert` of a checkpoint that 2 SimpleFSDP ranks wrote (each its
// shard of every tensor) on one process: the Hugging Face folder holds the
// whole model, the same files, bit for bit, as the run's own end-of-run
// export, which rank 0 writes from the gathered parameters.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/cli.h"
#include "tests/support/mesh_runs.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

TEST(ConvertFsdp, ATwoRankCheckpointConvertsToTheWholeModel) {
  TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  const fs::path run = dir / "run", hf = dir / "hf";
  write_grammar_corpus(corpus);
  CliRun r = run_cli(debug_train_args(corpus, run.string(), 4,
                                      "--training.local_batch_size 2 "
                                      "--parallelism.data_parallel_shard_degree 2 "
                                      "--checkpoint.enable --checkpoint.last_save_in_hf"),
                     mpirun(2));
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path step = run / "checkpoint" / "step-4";
  ASSERT_TRUE(fs::exists(step / "model-00002-of-00002.safetensors")) << r.output;

  r = run_cli("convert --from " + step.string() + " --to " + hf.string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json",
                        "tokenizer.json", "tokenizer_config.json"}) {
    ASSERT_TRUE(fs::exists(hf / f)) << f;
    EXPECT_EQ(read_file(hf / f), read_file(run / "hf" / f)) << f;
  }
}

}  // namespace
}  // namespace kiln::test
