#include "tests/support/python.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

namespace kiln::test {

::testing::AssertionResult run_oracle_script(const std::string& script, const std::string& args,
                                             const std::string& log) {
  std::string cmd = std::string("\"") + KILN_PYTHON + "\" \"" + KILN_SOURCE_DIR + "/tests/oracle/" +
                    script + "\" " + args + " > \"" + log + "\" 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string out((std::istreambuf_iterator<char>(in)), {});
  std::cout << out;
  if (rc == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "`" << cmd << "` failed (status " << rc << "):\n" << out;
}

}  // namespace kiln::test
