// What a parallelism plan applies itself to: the model's parameters,
// checked against the names the plan was made for (the model must be the
// plan's, in named_parameters() order). `plan` names the plan in errors.
#pragma once
#include <string>
#include <vector>

#include "kiln/models/transformer.h"

namespace kiln::train {

std::vector<std::pair<std::string, Tensor*>> plan_parameters(
    CausalLM& model, const std::vector<std::string>& names, const char* plan);

}  // namespace kiln::train
