// The model side of a run as RunSetup builds it: under bf16 mixed
// precision the model the steps run holds no second copy of the weights
// (its scopes supply them), only stand-ins of the right types.
#include "kiln/train/run_setup.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/runtime/backend.h"
#include "kiln/train/config.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

TrainConfig debug_config(const std::string& param_dtype) {
  return load_train_config(parse_train_command_line(
      {"--config", (fs::path(KILN_SOURCE_DIR) / "recipes" / "llama3_debug.toml").string(),
       "--training.mixed_precision_param=" + param_dtype}));
}

int64_t storage_bytes(const Tensor& t) { return int64_t(t.impl().storage->nbytes); }

TEST(RunSetup, ABf16ModelHoldsStandInsNotASecondCopy) {
  RunSetup s(debug_config("bfloat16"), std::make_shared<dist::DeviceMesh>(dist::MeshDegrees{}, 1, 0),
             kCPU);
  s.build(/*load_initial_weights=*/false);
  const std::vector<Tensor> params = s.model->parameters();
  ASSERT_EQ(params.size(), s.masters.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].dtype(), DType::bf16) << s.names[i];
    EXPECT_EQ(params[i].shape(), s.masters[i].shape()) << s.names[i];
    EXPECT_EQ(storage_bytes(params[i]), 2) << s.names[i] << ": one bf16 zero";
  }
}

TEST(RunSetup, AnF32ModelRunsOnTheMasters) {
  RunSetup s(debug_config("float32"), std::make_shared<dist::DeviceMesh>(dist::MeshDegrees{}, 1, 0),
             kCPU);
  s.build(/*load_initial_weights=*/false);
  const std::vector<Tensor> params = s.model->parameters();
  ASSERT_EQ(params.size(), s.masters.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].impl().storage, s.masters[i].impl().storage) << s.names[i];
}

}  // namespace
}  // namespace kiln::train
