// The program cache keeps its ready programs under the L1 bound. The bound
// is read from the environment when this process first uses its compile
// cache, so this file holds one test, which sets it first.
#include "kiln/runtime/program_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/compile_cache.h"
#include "kiln/runtime/recording.h"

namespace kiln {
namespace {

// sum(x * x) over n elements: graphs of one size in text for n of one
// number of digits, each a program of its own.
ir::Graph square_sum(int64_t n) {
  auto rec = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0] * a[0])}; },
                   {ir::TypeInfo{DType::f32, Shape{n}}}, kCPU);
  return rec->graph;
}

TEST(ProgramCache, ReadyProgramsPastTheL1BoundLeaveUsedLongestAgoFirst) {
  ProgramOptions options;
  options.passes.fuse = false;  // no fused kernels: the programs' IR is all L1 holds
  const int64_t size = int64_t(ir::to_text(compiler::optimize(square_sum(1001), options.passes)).size());
  const int64_t bound = size * 5 / 2;  // two programs, not three
  setenv("KILN_CACHE", "off", 1);
  setenv("KILN_L1_CACHE_MAX_SIZE", std::to_string(bound).c_str(), 1);
  ASSERT_EQ(CompileCache::instance().max_bytes(CacheTier::l1), bound)
      << "something used the compile cache before the test set its bound";

  auto get = [&](int64_t n) { return get_executable(square_sum(n), kCPU, options); };
  auto first = get(1001), second = get(1002);
  EXPECT_EQ(get(1001), first);  // a ready hit, so 1002 is now the oldest
  auto third = get(1003);
  EXPECT_EQ(get(1001), first);
  EXPECT_EQ(get(1003), third);
  EXPECT_NE(get(1002), second) << "the program used longest ago should have been built again";
  // An Executable that left the cache still runs for whoever holds it.
  Tensor x = full({1002}, 2.0);
  EXPECT_FLOAT_EQ(second->run(std::vector<Tensor>{x})[0].item<float>(), 4.0f * 1002);
}

}  // namespace
}  // namespace kiln
