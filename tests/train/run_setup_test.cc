// The model side of a run as RunSetup builds it: under bf16 mixed
// precision the model the steps run holds no second copy of the weights
// (its scopes supply them), only stand-ins of the right types.
#include "kiln/train/run_setup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "kiln/runtime/backend.h"
#include "kiln/train/config.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

// llama3_debug set up on one CPU rank, its master weights in f32 and its
// compute copies in `param_dtype`.
std::unique_ptr<RunSetup> built(const std::string& param_dtype) {
  TrainConfig c = load_train_config(parse_train_command_line(
      {"--config", (fs::path(KILN_SOURCE_DIR) / "recipes" / "llama3_debug.toml").string(),
       "--training.mixed_precision_param=" + param_dtype}));
  auto s = std::make_unique<RunSetup>(c, std::make_shared<dist::DeviceMesh>(dist::MeshDegrees{}, 1, 0),
                                      kCPU);
  s->build(/*load_initial_weights=*/false);
  EXPECT_EQ(s->model->parameters().size(), s->masters.size());
  return s;
}

TEST(RunSetup, ABf16ModelHoldsStandInsNotASecondCopy) {
  std::unique_ptr<RunSetup> s = built("bfloat16");
  const std::vector<Tensor> params = s->model->parameters();
  for (size_t i = 0; i < std::min(params.size(), s->masters.size()); ++i) {
    EXPECT_EQ(params[i].dtype(), DType::bf16) << s->names[i];
    EXPECT_EQ(params[i].shape(), s->masters[i].shape()) << s->names[i];
    EXPECT_EQ(params[i].impl().storage->nbytes, 2u) << s->names[i] << ": one bf16 zero";
  }
}

TEST(RunSetup, AnF32ModelRunsOnTheMasters) {
  std::unique_ptr<RunSetup> s = built("float32");
  const std::vector<Tensor> params = s->model->parameters();
  for (size_t i = 0; i < std::min(params.size(), s->masters.size()); ++i)
    EXPECT_EQ(params[i].impl().storage, s->masters[i].impl().storage) << s->names[i];
}

}  // namespace
}  // namespace kiln::train
