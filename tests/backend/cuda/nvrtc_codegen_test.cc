// Every kind of kernel the CUDA code generator makes compiles through NVRTC
// for sm_90 (NVRTC needs no GPU, so this runs everywhere the toolkit is):
// each elementwise op in each dtype it takes, cast between every pair, full
// and arange, each reduction in each dtype over the row walk, the column walk
// and the two-pass walk of long rows, bodies laid out otherwise than
// naturally, and the fused nodes the compiler makes of random graphs, each in
// both variants (specialised and shape-generic). Also: a shape-generic
// source holds no sizes (bodies of any shape share it and its cubin), and
// cubins' cache keys differ by architecture and NVRTC version.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "kiln/backend/cuda/fused/codegen.h"
#include "kiln/backend/cuda/fused/cubin_cache.h"
#include "kiln/backend/cuda/fused/nvrtc.h"
#include "kiln/base/error.h"
#include "kiln/codegen/elementwise_ops.h"
#include "kiln/codegen/plan.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/ir/graph.h"
#include "tests/backend/cuda/against_cpu.h"
#include "tests/compiler/random_graphs.h"

namespace kiln::cuda::fused {
namespace {

constexpr int kArch = 90;

// The body of one `op` node over inputs of these types, or nullopt when the
// op's shape rule refuses them (a dtype it does not take).
std::optional<std::string> one_node(const char* op, const std::vector<ir::TypeInfo>& inputs,
                                    const ir::Attrs& attrs = {}) {
  ir::Graph g;
  std::vector<ir::ValueId> in;
  for (const ir::TypeInfo& t : inputs) in.push_back(g.add_input(t));
  try {
    g.set_outputs(g.add_node(ir::get_op(op), in, attrs).outputs);
  } catch (const Error&) {
    return std::nullopt;
  }
  return ir::to_text(g);
}

// Compiles the body's kernels, both variants, for `space` (default: its
// natural layout).
void expect_compiles(const std::string& body, const std::string& kind, const std::string& what,
                     const codegen::Space* space = nullptr) {
  for (Variant v : {Variant::specialised, Variant::shape_generic}) {
    const std::string name = cat(what, v == Variant::specialised ? "" : "_generic");
    try {
      const codegen::Plan p = codegen::make_plan(body, kind);
      const std::string source = generate_source(p, space ? *space : p.natural, v);
      EXPECT_FALSE(compile_cubin(source, name + ".cu", kArch).empty()) << name;
    } catch (const Error& e) {
      ADD_FAILURE() << name << ":\n" << e.what() << "\nbody:\n" << body;
    }
  }
}

std::string source_of(const std::string& body, const std::string& kind, Variant v) {
  const codegen::Plan p = codegen::make_plan(body, kind);
  return generate_source(p, p.natural, v);
}

TEST(NvrtcCodegen, EveryElementwiseOpInEveryDtypeItTakes) {
  int compiled = 0;
  for (DType t : kAllDTypes) {
    const std::string d = dtype_name(t);
    for (const std::string& op : test::unary_op_names())
      if (auto body = one_node(op.c_str(), {{t, {4, 8}}})) {
        expect_compiles(*body, "elementwise", op + "_" + d);
        ++compiled;
      }
    // The second input broadcasts.
    for (const std::string& op : test::binary_op_names())
      if (auto body = one_node(op.c_str(), {{t, {4, 8}}, {t, {8}}})) {
        expect_compiles(*body, "elementwise", op + "_" + d);
        ++compiled;
      }
    for (bool tanh : {false, true})
      if (auto body = one_node("gelu", {{t, {4, 8}}}, {{"tanh_approximation", tanh}})) {
        expect_compiles(*body, "elementwise", "gelu_" + d);
        ++compiled;
      }
    if (auto body = one_node("where", {{DType::b8, {4, 8}}, {t, {4, 8}}, {t, {1}}})) {
      expect_compiles(*body, "elementwise", "where_" + d);
      ++compiled;
    }
    for (DType to : kAllDTypes)
      if (auto body = one_node("cast", {{t, {4, 8}}}, {{"dtype", to}})) {
        expect_compiles(*body, "elementwise", cat("cast_", d, "_", dtype_name(to)));
        ++compiled;
      }
    if (auto body = one_node("full", {}, {{"shape", ir::IntList{3, 5}}, {"value", 2.5}, {"dtype", t}})) {
      expect_compiles(*body, "elementwise", "full_" + d);
      ++compiled;
    }
    if (auto body = one_node("arange", {}, {{"start", 1.0}, {"stop", 11.0}, {"step", 0.5}, {"dtype", t}})) {
      expect_compiles(*body, "elementwise", "arange_" + d);
      ++compiled;
    }
  }
  // Every op of the lists took at least f32 (or bool), and cast every pair.
  EXPECT_GT(compiled, 200);
}

TEST(NvrtcCodegen, EveryReductionInEveryDtypeAndWalk) {
  struct Walk {
    const char* name;
    Shape shape;
    ir::IntList axes;
  };
  const Walk walks[] = {
      {"rows", {6, 300}, {1}},
      {"columns", {300, 40}, {0}},
      {"two_pass_rows", {2, 40000}, {1}},
      {"two_pass_columns", {40000, 16}, {0}},
      {"all", {5, 7}, {}},
  };
  int compiled = 0;
  for (const char* op : {"sum", "mean", "max", "min"})
    for (DType t : kAllDTypes)
      for (const Walk& w : walks)
        if (auto body = one_node(op, {{t, w.shape}}, {{"axes", w.axes}, {"keepdim", false}})) {
          const std::string what = cat(op, "_", dtype_name(t), "_", w.name);
          const codegen::Plan p = codegen::make_plan(*body, "reduction");
          EXPECT_EQ(p.reduction->columns != 0, std::string(w.name).find("columns") != std::string::npos)
              << what;
          EXPECT_EQ(launch_of(p).chunks > 1, std::string(w.name).find("two_pass") == 0) << what;
          expect_compiles(*body, "reduction", what);
          ++compiled;
        }
  // Per walk: sum takes all 7 dtypes, mean the 4 floating ones, max and min all but bool.
  EXPECT_EQ(compiled, 5 * (7 + 4 + 6 + 6));
  // Nothing to fold: every result is the identity.
  if (auto body = one_node("sum", {{DType::f32, {4, 0}}}, {{"axes", ir::IntList{1}}}))
    expect_compiles(*body, "reduction", "sum_empty");
}

TEST(NvrtcCodegen, OtherLayoutsGetKernelsOfTheirOwn) {
  auto body = one_node("add", {{DType::f32, {8, 4}}, {DType::f32, {8, 4}}});
  ASSERT_TRUE(body);
  const codegen::Plan p = codegen::make_plan(*body, "elementwise");
  // Input 0 is the transpose of a [4, 8] buffer.
  const Strides strides[] = {{1, 8}, {4, 1}, {4, 1}};
  const codegen::Space transposed = codegen::make_space(p, strides);
  ASSERT_FALSE(transposed == p.natural);
  EXPECT_NE(generate_source(p, transposed, Variant::specialised),
            generate_source(p, p.natural, Variant::specialised));
  expect_compiles(*body, "elementwise", "add_transposed", &transposed);
}

TEST(NvrtcCodegen, ShapeGenericSourcesHoldNoSizes) {
  // Contiguous operands merge to a space of rank 1 whatever their shape.
  const auto add_a = one_node("add", {{DType::f32, {4, 8}}, {DType::f32, {4, 8}}});
  const auto add_b = one_node("add", {{DType::f32, {17, 3, 5}}, {DType::f32, {17, 3, 5}}});
  ASSERT_TRUE(add_a && add_b);
  EXPECT_EQ(source_of(*add_a, "elementwise", Variant::shape_generic),
            source_of(*add_b, "elementwise", Variant::shape_generic));
  EXPECT_NE(source_of(*add_a, "elementwise", Variant::specialised),
            source_of(*add_b, "elementwise", Variant::specialised));
  // A reduction of one walk, one pass or two: one source.
  const ir::Attrs rows{{"axes", ir::IntList{1}}, {"keepdim", false}};
  const auto sum_a = one_node("sum", {{DType::bf16, {6, 300}}}, rows);
  const auto sum_b = one_node("sum", {{DType::bf16, {2, 40000}}}, rows);
  ASSERT_TRUE(sum_a && sum_b);
  const std::string generic = source_of(*sum_a, "reduction", Variant::shape_generic);
  EXPECT_EQ(generic, source_of(*sum_b, "reduction", Variant::shape_generic));
  EXPECT_EQ(cubin_key(generic, kArch, "13.0"),
            cubin_key(source_of(*sum_b, "reduction", Variant::shape_generic), kArch, "13.0"));
  EXPECT_EQ(generic.find("300"), std::string::npos) << generic;
  // Another dtype is another kernel.
  const auto sum_f32 = one_node("sum", {{DType::f32, {6, 300}}}, rows);
  ASSERT_TRUE(sum_f32);
  EXPECT_NE(generic, source_of(*sum_f32, "reduction", Variant::shape_generic));
}

TEST(NvrtcCodegen, LayoutArgumentsFollowTheSpace) {
  const auto body = one_node("add", {{DType::f32, {8, 4}}, {DType::f32, {4}}});
  ASSERT_TRUE(body);
  const codegen::Plan p = codegen::make_plan(*body, "elementwise");
  ASSERT_EQ(p.natural.shape.size(), 2);
  // sizes, three operands' strides, then numel, length, results, columns, chunks, tiles.
  const std::vector<uint64_t> expected = {8, 4, 4, 1, 0, 1, 4, 1, 32, 0, 0, 0, 1, 0};
  EXPECT_EQ(layout_arguments(p, p.natural), expected);
}

TEST(NvrtcCodegen, FusedNodesOfRandomGraphs) {
  int fused = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    // The pipeline, as compile() runs it: dead nodes go before the fuse pass.
    const ir::Graph g = compiler::optimize(compiler::test::random_graph(seed), {});
    for (const ir::Node& n : g.nodes())
      if (n.op->name == "fused") {
        expect_compiles(n.attrs.s("body"), n.attrs.s("kind"), cat("seed", seed, "_node", fused));
        ++fused;
      }
  }
  EXPECT_GT(fused, 40);
}

TEST(NvrtcCodegen, SourcesShareTheCpuExpressionsAndEmbedTheirHeaders) {
  auto body = one_node("exp", {{DType::bf16, {16}}});
  ASSERT_TRUE(body);
  const codegen::Plan p = codegen::make_plan(*body, "elementwise");
  const std::string src = generate_source(p, p.natural, Variant::specialised);
  EXPECT_NE(src.find("kiln::codegen::round_to<kiln::bf16>(kiln::codegen::Exp{}(v0))"), std::string::npos) << src;
  EXPECT_NE(src.find("struct Exp"), std::string::npos);
  EXPECT_EQ(src.find("#include \"kiln/"), std::string::npos) << "needs the kiln source tree";
}

TEST(NvrtcCodegen, FailuresCarryNvrtcsLog) {
  try {
    compile_cubin("this is not CUDA", "bad.cu", kArch);
    FAIL() << "compiled";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("NVRTC failed"), std::string::npos) << m;
    EXPECT_NE(m.find("bad.cu"), std::string::npos) << m;
    EXPECT_NE(m.find("error"), std::string::npos) << "no log: " << m;
  }
}

TEST(NvrtcCodegen, CacheKeysDifferByArchitectureAndNvrtcVersion) {
  EXPECT_FALSE(nvrtc_version().empty());
  auto body = one_node("neg", {{DType::f32, {16}}});
  ASSERT_TRUE(body);
  const codegen::Plan p = codegen::make_plan(*body, "elementwise");
  const std::string src = generate_source(p, p.natural, Variant::specialised);
  const CacheKey key = cubin_key(src, 90, "13.0");
  EXPECT_EQ(key.kind, "cuda_fused_cubin");
  EXPECT_EQ(cubin_key(src, 90, "13.0"), key);
  EXPECT_NE(cubin_key(src, 80, "13.0").fingerprint, key.fingerprint);
  EXPECT_NE(cubin_key(src, 90, "12.8").fingerprint, key.fingerprint);
  EXPECT_NE(cubin_key(src + "\n", 90, "13.0").fingerprint, key.fingerprint);
  EXPECT_NE(entry_name(cubin_key(src, 80, "13.0")), entry_name(key));
}

}  // namespace
}  // namespace kiln::cuda::fused
