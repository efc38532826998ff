// `kiln bench ...`: micro-benchmarks users run on their own machine.
#include <iostream>

#include "apps/kiln/commands.h"

namespace kiln::cli {

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure kiln's kernels on this machine");
  cmd->require_subcommand(1);
}

}  // namespace kiln::cli
