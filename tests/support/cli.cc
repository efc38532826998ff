#include "tests/support/cli.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace kiln::test {

CliRun run_cli(const std::string& args, const std::string& env) {
  const char* cli = std::getenv("KILN_CLI");
  EXPECT_NE(cli, nullptr) << "KILN_CLI is set by ctest";
  std::string cmd = env + " " + std::string(cli ? cli : "kiln") + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace kiln::test
