// Region names (ir::Node::region): a model region such as "layers.3" holds a
// block's forward nodes; its backward nodes are in "layers.3.backward".
#pragma once
#include <cstdint>
#include <string>

namespace kiln::ir {

// The region of the backward computation of nodes in `forward_region`.
std::string backward_region(const std::string& forward_region);
bool is_backward_region(const std::string& region);
// The layer number a region names, the number after its last '.' (before
// ".backward"): 3 for "layers.3" and "layers.3.backward"; -1 for none.
int64_t region_index(const std::string& region);

}  // namespace kiln::ir
