// Preparing a program's CUDA kernels (Kernel::prepare, runtime/kernel.h)
// starts their NVRTC compiles on the compile pool; preparing again compiles
// nothing more, and a later cubin_for of a prepared kernel finds it ready.
// NVRTC needs no GPU, so this runs everywhere the toolkit is (the hooks'
// own architecture look-up needs a device; prepare_body takes it instead).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "kiln/backend/cuda/fused/codegen.h"
#include "kiln/backend/cuda/fused/cubin_cache.h"
#include "kiln/backend/cuda/fused/fused_kernel.h"
#include "kiln/codegen/plan.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel.h"
#include "tests/compiler/random_graphs.h"

namespace kiln::cuda::fused {
namespace {

constexpr int kArch = 90;

// Off before the cache's first use, so every cubin here is an NVRTC compile.
const bool cache_off = setenv("KILN_CACHE", "off", 1) == 0;

TEST(CudaPrepare, KernelsThatGenerateCodeHaveAPrepareHook) {
  for (const char* op : {"fused", "add", "exp", "cast", "full", "sum", "max"}) {
    const Kernel* k = find_kernel(DeviceKind::cuda, op);
    ASSERT_TRUE(k) << op;
    EXPECT_TRUE(k->prepare) << op;
  }
}

TEST(CudaPrepare, PreparingAProgramsFusedNodesCompilesEachKernelOnceInTheBackground) {
  ASSERT_TRUE(cache_off);
  const ir::Graph g = compiler::optimize(compiler::test::random_graph(3), {});
  std::set<std::string> sources;
  for (const ir::Node& n : g.nodes()) {
    if (n.op->name != "fused") continue;
    const codegen::Plan p = codegen::make_plan(n.attrs.s("body"), n.attrs.s("kind"));
    if (p.reduction ? p.reduction->results > 0 : p.numel > 0)
      sources.insert(generate_source(p, p.natural, Variant::specialised));
  }
  ASSERT_FALSE(sources.empty());
  const int64_t n = int64_t(sources.size());

  const CubinStats before = cubin_stats();
  for (int round = 0; round < 2; ++round)
    for (const ir::Node& node : g.nodes())
      if (node.op->name == "fused") prepare_body(node.attrs.s("body"), node.attrs.s("kind"), Variant::specialised, kArch);
  EXPECT_EQ(cubin_stats().started, before.started + n) << "preparing twice started compiles twice";

  // The compiles run on the pool: nothing here asks for a cubin.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (cubin_stats().compiled < before.compiled + n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cubin_stats().compiled, before.compiled + n);

  // The calls' cubins are the prepared ones.
  for (const std::string& s : sources) EXPECT_FALSE(cubin_for(s, kArch).bytes.empty());
  EXPECT_EQ(cubin_stats().compiled, before.compiled + n) << "a prepared kernel compiled again";
}

TEST(CudaPrepare, EagerOpsOfEveryShapeShareOneShapeGenericCompile) {
  ASSERT_TRUE(cache_off);
  const CubinStats before = cubin_stats();
  for (int64_t size : {5, 300, 4096}) {
    ir::Graph g;
    g.set_outputs(g.add_node(ir::get_op("sin"), {g.add_input({DType::f16, {size, 3}})}, {}).outputs);
    prepare_body(ir::to_text(g), "elementwise", Variant::shape_generic, kArch);
  }
  EXPECT_EQ(cubin_stats().started, before.started + 1);
}

// NVRTC tears its state down at exit; a background compile then still
// running must finish first, not crash the exiting process.
TEST(CudaPrepare, ExitingWhileACompileRunsInTheBackgroundExitsCleanly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto source = [](DType dtype) {
    ir::Graph g;
    g.set_outputs(g.add_node(ir::get_op("exp"), {g.add_input({dtype, {7}})}, {}).outputs);
    const codegen::Plan p = codegen::make_plan(ir::to_text(g), "elementwise");
    return generate_source(p, p.natural, Variant::specialised);
  };
  EXPECT_EXIT(
      {
        // Runs last at exit, as a slow exit handler would: the compile has time to meet a torn-down NVRTC.
        std::atexit([] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); });
        start_cubin(source(DType::f32), kArch);  // NVRTC's first compile registers its teardown
        cubin_for(source(DType::f32), kArch);
        const int64_t compiled = cubin_stats().compiled;
        start_cubin(source(DType::f64), kArch);
        while (cubin_stats().compiled == compiled) std::this_thread::yield();  // now compiling
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kiln::cuda::fused
