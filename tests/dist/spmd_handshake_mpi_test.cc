// The SPMD handshake (kiln/dist/spmd_handshake.h) on 2 and 4 ranks: equal
// graphs pass; a rank whose graph differs makes every rank fail with the
// ranks of each kind and the first line that differs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kiln/dist/spmd_handshake.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/recording.h"

namespace kiln::dist {
namespace {

using namespace std::chrono_literals;

// exp(x), or -x when `odd`.
ir::Graph graph_of(bool odd) {
  auto fn = [odd](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{odd ? -a[0] : exp(a[0])};
  };
  return trace(fn, {ir::TypeInfo{DType::f32, Shape{4}}}, kCPU)->graph;
}

TEST(SpmdHandshake, EqualGraphsPass) {
  world()->set_timeout(60s);
  EXPECT_NO_THROW(spmd_handshake(*world(), graph_of(false), "the test program"));
}

TEST(SpmdHandshake, ADifferentRankFailsEveryRankWithTheFirstDifference) {
  world()->set_timeout(60s);
  const int n = world()->size();
  try {
    spmd_handshake(*world(), graph_of(world()->rank() == 1), "the test program");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    std::string others = n == 2 ? "rank 0" : "ranks 0,2" + std::string(n == 4 ? ",3" : "");
    for (const std::string& part :
         {std::string("SPMD handshake before the test program"), "2 kinds: " + others + "; rank 1",
          others + ": `  %1: f32[4] = exp(%0)`", std::string("rank 1: `  %1: f32[4] = neg(%0)`")})
      EXPECT_NE(m.find(part), std::string::npos) << part << "\n" << m;
  }
}

TEST(SpmdHandshake, ModeFromTheEnvironment) {
  ::setenv("KILN_SPMD_HANDSHAKE", "dispatch", 1);
  EXPECT_EQ(handshake_mode(), Handshake::dispatch);
  ::setenv("KILN_SPMD_HANDSHAKE", "always", 1);
  EXPECT_THROW(handshake_mode(), Error);
  ::unsetenv("KILN_SPMD_HANDSHAKE");
  EXPECT_EQ(handshake_mode(), Handshake::off);
}

}  // namespace
}  // namespace kiln::dist
