// The op oracle cases tests/oracle/gen_ops.py recorded from PyTorch
// (ops.safetensors, found through KILN_ORACLE_DIR, written by the
// oracle_data ctest fixture), and how a case runs in kiln: its op on its
// inputs and attributes, then, for differentiable cases, the gradients of
// loss = sum(out * cot) from value_and_grad. Shared by the oracle suite
// (against torch) and the CUDA suite (against the CPU).
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/runtime/tensor.h"
#include "tests/support/safetensors_reader.h"

namespace kiln::test {

struct OpCases {
  std::unique_ptr<SafeTensors> file;
  nlohmann::json cases = nlohmann::json::array();
  nlohmann::json excluded = nlohmann::json::object();  // op name -> why it has no cases
  std::string error;  // why the data could not be loaded
};

// Loaded once.
const OpCases& op_cases();

// For INSTANTIATE_TEST_SUITE_P over ::testing::Range(0, op_case_count()):
// at least one parameter (a missing file fails instead of running nothing).
int op_case_count();
std::string op_case_name(const ::testing::TestParamInfo<int>& info);

// Attributes as the data stores them: {"name": [kind, value]}.
ir::Attrs attrs_from(const nlohmann::json& j);

// Case `index` with its inputs and cotangents on `device` (inputs recorded
// as transposed are transposed there, so kernels see strided inputs).
struct OpCase {
  std::string name;
  const ir::OpDef* op = nullptr;
  ir::Attrs attrs;
  std::vector<Tensor> inputs, cots;
  Device device;  // where ops without inputs run
  const nlohmann::json* json = nullptr;  // the case as recorded
  bool with_grads() const { return !json->at("grads").empty(); }
};
OpCase load_op_case(int index, Device device = kCPU);

// A case's outputs, then its gradients (undefined for inputs without one),
// run in `mode`: an eager mode's name or "compile".
struct ModeRun {
  std::vector<Tensor> outs, grads;
};
ModeRun run_op_case(const char* mode, const OpCase& c);

}  // namespace kiln::test
