// Region names (ir::Node::region): a model region such as "layers.3" holds a
// block's forward nodes; its backward nodes are in "layers.3.backward".
#pragma once
#include <string>

namespace kiln::ir {

// The region of the backward computation of nodes in `forward_region`.
std::string backward_region(const std::string& forward_region);
bool is_backward_region(const std::string& region);

}  // namespace kiln::ir
