// Runs the kiln command line (the binary ctest names in $KILN_CLI) as a user
// would, for the e2e tests.
#pragma once
#include <string>

namespace kiln::test {

struct CliRun {
  int status;          // exit status, -1 when killed by a signal
  std::string output;  // stdout and stderr together
};

// Runs `<env> kiln <args>` through the shell; `env` is "NAME=value ..." or "".
CliRun run_cli(const std::string& args, const std::string& env = "");

}  // namespace kiln::test
