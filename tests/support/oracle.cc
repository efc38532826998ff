#include "tests/support/oracle.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "kiln/base/error.h"

namespace kiln::test {

const SafeTensors& oracle_file(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<SafeTensors>> files;
  std::lock_guard lock(mu);
  auto& slot = files[name];
  if (!slot) {
    const char* dir = std::getenv("KILN_ORACLE_DIR");
    KILN_CHECK(dir, "KILN_ORACLE_DIR is not set: run this test through ctest, which first runs "
               "tests/oracle/gen_", name, ".py (needs torch: scripts/setup.sh installs it)");
    slot = std::make_unique<SafeTensors>(std::string(dir) + "/" + name + ".safetensors");
  }
  return *slot;
}

}  // namespace kiln::test
