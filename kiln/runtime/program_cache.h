// Turns a recorded graph into an Executable through the compile cache: the
// raw graph's fingerprint is the key; L1 holds ready Executables in process
// (under the L1 bound, each weighing its optimized IR's size), the
// CompileCache tiers hold the optimized IR so another process or a later run
// skips the compiler passes.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/compiler/pipeline.h"
#include "kiln/ir/fingerprint.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/executable.h"

namespace kiln {

struct ProgramOptions {
  compiler::PassOptions passes;
  std::vector<std::pair<int, int>> donations;  // (graph input, graph output)
  // Labels the program in profiles; not part of the key, so programs of one
  // graph share the first caller's name.
  std::string name = "program";
  // Callers run the program replayed (executable.h); not part of the key.
  bool replay = false;
};

// The key get_executable finds the program for `g` under.
ir::Fingerprint program_fingerprint(const ir::Graph& g, Device device,
                                    const ProgramOptions& options);

// The Executable for `g` on `device`, compiled on a miss.
std::shared_ptr<const Executable> get_executable(const ir::Graph& g, Device device,
                                                 const ProgramOptions& options);
// Whether get_executable would find `g` ready in this process or in a
// cache tier, and so not run the compiler passes.
bool executable_cached(const ir::Graph& g, Device device, const ProgramOptions& options);

// Passes used when nothing else is said: KILN_FUSION=0 turns fusion off.
compiler::PassOptions default_pass_options();

}  // namespace kiln
