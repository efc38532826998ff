// The model side of a run as RunSetup builds it: the model the steps run
// holds no copy of the weights (its scopes supply them), only stand-ins of
// the right types, so the step can free each master as it updates it.
#include "kiln/train/run_setup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <utility>

#include "kiln/runtime/backend.h"
#include "kiln/train/config.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

// llama3_debug set up on one CPU rank, its master weights in f32 and its
// compute copies in `param_dtype` (the setup reads the config it was given
// for its whole life, so the fixture keeps both).
class RunSetupTest : public ::testing::Test {
 protected:
  void build(const std::string& param_dtype) {
    config_ = load_train_config(parse_train_command_line(
        {"--config", (fs::path(KILN_SOURCE_DIR) / "recipes" / "llama3_debug.toml").string(),
         "--training.mixed_precision_param=" + param_dtype}));
    setup_ = std::make_unique<RunSetup>(
        config_, std::make_shared<dist::DeviceMesh>(dist::MeshDegrees{}, 1, 0), kCPU);
    setup_->build(/*load_initial_weights=*/false);
    params_ = setup_->model->parameters();
    ASSERT_EQ(params_.size(), setup_->masters.size());
  }

  TrainConfig config_;
  std::unique_ptr<RunSetup> setup_;
  std::vector<Tensor> params_;  // the model's
};

TEST_F(RunSetupTest, TheModelHoldsStandInsNotTheWeights) {
  for (auto [name, dtype] : {std::pair{"bfloat16", DType::bf16}, std::pair{"float32", DType::f32}}) {
    ASSERT_NO_FATAL_FAILURE(build(name));
    for (size_t i = 0; i < params_.size(); ++i) {
      EXPECT_EQ(params_[i].dtype(), dtype) << setup_->names[i];
      EXPECT_EQ(params_[i].shape(), setup_->masters[i].shape()) << setup_->names[i];
      EXPECT_EQ(params_[i].impl().storage->nbytes, itemsize(dtype)) << setup_->names[i] << ": one zero";
    }
  }
}

}  // namespace
}  // namespace kiln::train
