// The model side of a run as RunSetup builds it: under bf16 mixed
// precision the model the steps run holds no second copy of the weights
// (its scopes supply them), only stand-ins of the right types.
#include "kiln/train/run_setup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

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

TEST_F(RunSetupTest, ABf16ModelHoldsStandInsNotASecondCopy) {
  ASSERT_NO_FATAL_FAILURE(build("bfloat16"));
  for (size_t i = 0; i < params_.size(); ++i) {
    EXPECT_EQ(params_[i].dtype(), DType::bf16) << setup_->names[i];
    EXPECT_EQ(params_[i].shape(), setup_->masters[i].shape()) << setup_->names[i];
    EXPECT_EQ(params_[i].impl().storage->nbytes, 2u) << setup_->names[i] << ": one bf16 zero";
  }
}

TEST_F(RunSetupTest, AnF32ModelRunsOnTheMasters) {
  ASSERT_NO_FATAL_FAILURE(build("float32"));
  for (size_t i = 0; i < params_.size(); ++i)
    EXPECT_EQ(params_[i].impl().storage, setup_->masters[i].impl().storage) << setup_->names[i];
}

}  // namespace
}  // namespace kiln::train
