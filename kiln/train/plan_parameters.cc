#include "kiln/train/plan_parameters.h"

#include "kiln/base/error.h"

namespace kiln::train {

std::vector<std::pair<std::string, Tensor*>> plan_parameters(
    CausalLM& model, const std::vector<std::string>& names, const char* plan) {
  auto params = model.named_parameters();
  KILN_CHECK(params.size() == names.size(), plan, ": the model has ", params.size(),
             " parameters, but the plan was made for ", names.size());
  for (size_t i = 0; i < params.size(); ++i)
    KILN_CHECK(params[i].first == names[i], plan, ": parameter ", i, " is '", params[i].first,
               "', but the plan was made for '", names[i], "'");
  return params;
}

}  // namespace kiln::train
