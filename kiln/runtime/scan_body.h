// The runtime side of the scan op (declared in kiln/autograd/scan.h): its
// body graphs, parsed once per IR text, and its kernel (one for every
// device), a loop that runs the body's compiled program once per iteration
// on the device queue's thread (Executable::run_inline), slicing the stacked
// inputs and outputs in place and keeping the carries in two buffers it
// swaps. Where transfers run apart from the kernels (CUDA), stacked tensors
// in the offload pool pass through device buffers, moved one iteration
// ahead (inputs) or behind (outputs) of the compute.
#pragma once
#include <memory>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln {

std::shared_ptr<const ir::Graph> scan_body_graph(const std::string& text);

}  // namespace kiln
