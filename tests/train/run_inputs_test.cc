// What a run reads before training (kiln/train/run_inputs.h): a rank other
// than rank 0 loads the tokenizer rank 0 wrote into the dump folder, and
// one that cannot see it says why.
#include "kiln/train/run_inputs.h"

#include <gtest/gtest.h>

#include <sstream>

#include "kiln/train/config.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln::train {
namespace {

TEST(RunInputs, ARankThatCannotSeeTheLeadsTokenizerSaysWhy) {
  test::TempDir dir;
  TrainConfig c;
  c.job.dump_folder = dir / "run";
  std::ostringstream out;
  test::expect_error([&] { run_tokenizer(c, ModelConfig{}, DataSource{}, false, out); },
                     "rank 0 wrote the run's tokenizer to " + (dir / "run") + "/tokenizer.json, which this "
                     "rank cannot see: every rank must see the same --job.dump_folder");
}

}  // namespace
}  // namespace kiln::train
