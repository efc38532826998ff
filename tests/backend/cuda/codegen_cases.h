// What the tests of CUDA's generated kernels share: fused_cuda_test runs
// them on a GPU, emulated_codegen_test on the CPU.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/compiler/pipeline.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/tensor.h"
#include "tests/compiler/random_graphs.h"
#include "tests/support/spread_values.h"

namespace kiln::test {

// A reduction's walk (codegen/plan.h): the input's shape and the axes.
struct Walk {
  const char* name;
  Shape shape;
  ir::IntList axes;
  bool keepdim;
};

// Every walk: rows, columns, both over more than one chunk of 16384 (two
// passes), all axes, a middle axis.
inline const std::vector<Walk>& reduction_walks() {
  static const std::vector<Walk> walks = {
      {"rows", {6, 300}, {1}, false},           {"columns", {300, 40}, {0}, true},
      {"two-pass rows", {3, 40000}, {1}, false}, {"two-pass columns", {40000, 16}, {0}, false},
      {"all", {5, 7, 9}, {}, false},             {"middle", {4, 50, 6}, {1}, true},
  };
  return walks;
}

// Calls f(seed, node, inputs) for each fused node the compiler makes of the
// random graphs of seeds 0 .. seeds-1, with spread inputs of its types.
template <class F>
void for_each_random_fused_node(uint32_t seeds, F f) {
  for (uint32_t seed = 0; seed < seeds; ++seed) {
    const ir::Graph g = compiler::optimize(compiler::test::random_graph(seed), {});
    for (const ir::Node& n : g.nodes()) {
      if (n.op->name != "fused") continue;
      std::vector<Tensor> in;
      for (size_t i = 0; i < n.inputs.size(); ++i)
        in.push_back(spread_tensor(g.type(n.inputs[i]).dtype, g.type(n.inputs[i]).shape, seed * 31 + uint32_t(i)));
      f(seed, n, in);
    }
  }
}

}  // namespace kiln::test
