// Locates the PyTorch reference data that tests/oracle/gen_<name>.py wrote
// into $KILN_ORACLE_DIR/<name>.safetensors (ctest sets the variable and runs
// the generators first, as a fixture).
#pragma once
#include <string>

#include "tests/support/safetensors_reader.h"

namespace kiln::test {

// Loads (once) and returns the named reference file; throws kiln::Error with
// what to do when it is missing.
const SafeTensors& oracle_file(const std::string& name);

}  // namespace kiln::test
