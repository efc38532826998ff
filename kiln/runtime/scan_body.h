// The runtime side of the scan op (declared in kiln/autograd/scan.h): its
// body graphs, parsed once per IR text, and its CPU kernel, a loop that runs
// the body's compiled program once per iteration on the device queue's
// thread (Executable::run_inline), slicing the stacked inputs and outputs
// in place and keeping the carries in two buffers it swaps.
#pragma once
#include <memory>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln {

std::shared_ptr<const ir::Graph> scan_body_graph(const std::string& text);

}  // namespace kiln
