// Runs the Python oracles of tests/oracle (with the interpreter CMake found,
// normally .venv/bin/python from scripts/setup.sh).
#pragma once
#include <gtest/gtest.h>

#include <string>

namespace kiln::test {

// Runs tests/oracle/<script> with `args` (shell words), its stdout and
// stderr to the file `log` and then to stdout; a failure carries the
// command, its exit status and its output.
::testing::AssertionResult run_oracle_script(const std::string& script, const std::string& args,
                                             const std::string& log);

}  // namespace kiln::test
