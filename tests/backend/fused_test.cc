// The CPU kernel of op "fused": for many bodies the interpreter and the
// generated code give the same bits as running the body's nodes one by one
// with the eager kernels (the reference: kiln::run_graph in strict mode);
// the first call does not wait for the compiler; bad bodies give errors that
// say what is wrong.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "kiln/codegen/elementwise_ops.h"
#include "kiln/backend/cpu/fused/codegen.h"
#include "kiln/backend/cpu/fused/fused_kernel.h"
#include "kiln/backend/cpu/fused/toolchain.h"
#include "kiln/base/error.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile_pool.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/tensor.h"
#include "kiln/runtime/threads.h"
#include "tests/support/spread_values.h"
#include "tests/support/temp_dir.h"

namespace kiln::cpu::fused {
namespace {

using ir::IntList;
using ir::ValueId;

// Compiled kernels go to a private cache directory, not the user's; it is
// removed when the test ends, once no build can still write into it. A
// death test's child (this program again) uses its parent's.
struct PrivateCache {
  std::optional<test::TempDir> dir;
  PrivateCache() {
    if (std::getenv("KILN_FUSED_TEST_CACHE")) return;
    dir.emplace();
    if (dir->path().empty()) return;
    setenv("KILN_FUSED_TEST_CACHE", "1", 1);
    setenv("KILN_CACHE_DIR", dir->path().c_str(), 1);
    setenv("KILN_L2_CACHE_DIR", (dir->path() + "/l2").c_str(), 1);
  }
  ~PrivateCache() {
    if (dir) wait_for_compile_jobs();
  }
} private_cache;

// Uses the library's declaration of op "fused" (kiln/compiler/fused_op.cc)
// when linked in; otherwise a test-local one with the same attributes.
const ir::OpDef& fused_op() {
  if (const ir::OpDef* op = ir::find_op("fused")) return *op;
  static const ir::OpDef& op = ir::register_op({
      .name = "fused",
      .num_inputs = -1,
      .attrs = {{"body", ir::AttrKind::string, std::nullopt},
                {"kind", ir::AttrKind::string, std::string("elementwise")}},
      .infer = [](std::span<const ir::TypeInfo>, const ir::Attrs& a) {
        ir::Graph g = ir::parse_graph(a.s("body"));
        std::vector<ir::TypeInfo> out;
        for (ValueId v : g.outputs()) out.push_back(g.type(v));
        return out;
      },
  });
  return op;
}

// A body under construction.
struct Body {
  ir::Graph g;
  ValueId in(DType t, Shape s) { return g.add_input({t, s}); }
  ValueId op(const char* name, std::vector<ValueId> in, const ir::Attrs& attrs = {}) {
    return g.add_node(ir::get_op(name), std::move(in), attrs).outputs[0];
  }
  ValueId full(double v, DType t, Shape s = {}) {
    return op("full", {}, {{"shape", IntList(s.vec())}, {"value", v}, {"dtype", t}});
  }
  ValueId cast(ValueId v, DType t) { return op("cast", {v}, {{"dtype", t}}); }
  ValueId reduce(const char* name, ValueId v, IntList axes, bool keepdim = false) {
    return op(name, {v}, {{"axes", axes}, {"keepdim", keepdim}});
  }
  std::string text(std::vector<ValueId> outs) {
    g.set_outputs(std::move(outs));
    return ir::to_text(g);
  }
};

using test::element_bytes;
using test::spread_tensor;

std::vector<Tensor> run_unfused(const std::string& body, const std::vector<Tensor>& inputs) {
  EagerModeGuard strict(EagerMode::strict);
  std::vector<Tensor> out = run_graph(ir::parse_graph(body), inputs, "unfused body");
  synchronize();
  return out;
}

TensorRef ref_of(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  return {static_cast<char*>(impl.storage->data) + impl.offset * int64_t(itemsize(impl.dtype)),
          impl.dtype, impl.shape, impl.strides};
}

// Calls the kernel itself, as the runtime would for a fused node.
std::vector<Tensor> run_fused(const std::string& body, const std::string& kind,
                              const std::vector<Tensor>& inputs) {
  EagerModeGuard strict(EagerMode::strict);
  ir::Graph g = ir::parse_graph(body);
  std::vector<Tensor> out;
  std::vector<TensorRef> in_refs, out_refs;
  for (ValueId v : g.outputs()) out.push_back(zeros(g.type(v).shape, g.type(v).dtype));
  synchronize();
  for (const Tensor& t : inputs) in_refs.push_back(ref_of(t));
  for (const Tensor& t : out) out_refs.push_back(ref_of(t));
  ir::Attrs attrs{{"body", body}, {"kind", kind}};
  find_kernel(DeviceKind::cpu, "fused")->fn(KernelArgs{in_refs, out_refs, attrs, fused_op()});
  return out;
}

// A graph of one fused node, run by the runtime.
std::vector<Tensor> run_fused_node(const std::string& body, const std::string& kind,
                                   const std::vector<Tensor>& inputs) {
  EagerModeGuard strict(EagerMode::strict);
  ir::Graph g;
  std::vector<ValueId> ids;
  for (const Tensor& t : inputs) ids.push_back(g.add_input(t.type()));
  const ir::Node& n = g.add_node(fused_op(), ids, {{"body", body}, {"kind", kind}});
  g.set_outputs(n.outputs);
  std::vector<Tensor> out = run_graph(g, inputs, "fused node");
  synchronize();
  return out;
}

void expect_same_bits(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].type(), want[i].type()) << what << " output " << i;
    std::vector<uint8_t> a = element_bytes(got[i]), b = element_bytes(want[i]);
    size_t diff = 0;
    while (diff < a.size() && a[diff] == b[diff]) ++diff;
    EXPECT_EQ(diff, a.size()) << what << ": output " << i << " (" << ir::to_string(got[i].type())
                              << ") differs from the unfused result at byte " << diff;
  }
}

class Fused : public ::testing::Test {
 protected:
  void TearDown() override { set_codegen_mode(std::nullopt); }

  // Runs the body unfused, interpreted and generated (and, for a
  // transposed copy of the inputs, interpreted on strided views); all must
  // give the same bits.
  void check(const std::string& body, const std::string& kind, const std::vector<Tensor>& inputs) {
    SCOPED_TRACE(body);
    std::vector<Tensor> want = run_unfused(body, inputs);

    set_codegen_mode(CodegenMode::off);
    FusedStats before = fused_stats();
    expect_same_bits(run_fused(body, kind, inputs), want, "interpreter");
    EXPECT_EQ(fused_stats().interpreted, before.interpreted + 1);

    set_codegen_mode(CodegenMode::sync);
    before = fused_stats();
    expect_same_bits(run_fused(body, kind, inputs), want, "generated code");
    EXPECT_EQ(fused_stats().generated, before.generated + 1) << "the generated code did not run";
    EXPECT_EQ(codegen_status(body, kind).state, CodegenState::ready);

    // The same values through strided views: runs the interpreter.
    std::vector<Tensor> strided;
    for (const Tensor& t : inputs) {
      if (t.rank() < 2) {
        strided.push_back(t);
        continue;
      }
      strided.push_back(t.transpose(0, 1).contiguous().transpose(0, 1));
    }
    expect_same_bits(run_fused(body, kind, strided), want, "strided inputs");
  }
};

TEST_F(Fused, ChainOfEightElementwiseOps) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    Body b;
    ValueId x = b.in(t, {37, 129});
    ValueId y = b.in(t, {37, 129});
    ValueId v = b.op("mul", {x, b.full(0.75, t)});
    v = b.op("add", {v, y});
    v = b.op("tanh", {v});
    v = b.op("mul", {v, x});
    v = b.op("sub", {v, b.full(0.1, t)});
    v = b.op("exp", {v});
    v = b.op("maximum", {v, y});
    v = b.op("sigmoid", {v});
    check(b.text({v}), "elementwise", {spread_tensor(t, {37, 129}, 1), spread_tensor(t, {37, 129}, 2)});
  }
}

// Every op of codegen/elementwise_ops.h's lists, in every type it takes.
TEST_F(Fused, EveryElementwiseOpInEveryType) {
  std::vector<const char*> numeric_unary, float_unary, numeric_binary, float_binary, compare, logical;
#define KILN_ADD_TO(list) [&](const char* op) { list.push_back(op); }
#define KILN_NAME(op, F) add(#op);
  {
    auto add = KILN_ADD_TO(numeric_unary);
    KILN_NUMERIC_UNARY_OPS(KILN_NAME)
  }
  {
    auto add = KILN_ADD_TO(float_unary);
    KILN_FLOAT_UNARY_OPS(KILN_NAME)
  }
  {
    auto add = KILN_ADD_TO(numeric_binary);
    KILN_NUMERIC_BINARY_OPS(KILN_NAME)
  }
  {
    auto add = KILN_ADD_TO(float_binary);
    KILN_FLOAT_BINARY_OPS(KILN_NAME)
  }
  {
    auto add = KILN_ADD_TO(compare);
    KILN_COMPARE_OPS(KILN_NAME)
  }
  {
    auto add = KILN_ADD_TO(logical);
    KILN_LOGICAL_BINARY_OPS(KILN_NAME)
  }
#undef KILN_NAME
#undef KILN_ADD_TO
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64}) {
    Body b;
    ValueId x = b.in(t, {1000}), y = b.in(t, {1000});
    std::vector<ValueId> outs;
    for (const char* f : numeric_unary) outs.push_back(b.op(f, {x}));
    for (const char* f : numeric_binary) outs.push_back(b.op(f, {x, y}));
    std::vector<ValueId> bools;
    for (const char* f : compare) bools.push_back(b.op(f, {x, y}));
    for (const char* f : logical) outs.push_back(b.op(f, {bools[0], bools[3]}));
    outs.push_back(b.op("logical_not", {bools[2]}));
    outs.insert(outs.end(), bools.begin(), bools.end());
    if (is_floating(t)) {
      for (const char* f : float_unary) outs.push_back(b.op(f, {x}));
      for (const char* f : float_binary) outs.push_back(b.op(f, {x, y}));
      outs.push_back(b.op("gelu", {x}, {{"tanh_approximation", true}}));
      outs.push_back(b.op("gelu", {x}, {{"tanh_approximation", false}}));
    }
    check(b.text(outs), "elementwise", {spread_tensor(t, {1000}, 3), spread_tensor(t, {1000}, 4)});
  }
}

TEST_F(Fused, BroadcastingInputsAndConstants) {
  Body b;
  ValueId x = b.in(DType::f32, {4, 1, 8});
  ValueId y = b.in(DType::f32, {3, 1});
  ValueId z = b.in(DType::f32, {8});
  ValueId s = b.in(DType::f32, {});
  ValueId v = b.op("add", {x, y});                      // [4,3,8]
  v = b.op("mul", {v, z});
  v = b.op("sub", {v, s});
  v = b.op("mul", {v, b.full(-1.5, DType::f32, {3, 1})});
  v = b.op("div", {v, b.op("add", {b.op("abs", {z}), b.full(1, DType::f32, {1})})});
  check(b.text({v, b.op("exp", {v})}), "elementwise",
        {spread_tensor(DType::f32, {4, 1, 8}, 4), spread_tensor(DType::f32, {3, 1}, 5),
         spread_tensor(DType::f32, {8}, 6), spread_tensor(DType::f32, {}, 7)});
}

TEST_F(Fused, WhereCompareCastAndLogicalMixes) {
  Body b;
  ValueId x = b.in(DType::bf16, {16, 33});
  ValueId y = b.in(DType::f32, {33});
  ValueId m = b.in(DType::b8, {16, 1});
  ValueId xf = b.cast(x, DType::f32);
  ValueId gt = b.op("gt", {xf, y});
  ValueId le = b.op("le", {xf, b.full(0.5, DType::f32)});
  ValueId both = b.op("logical_or", {b.op("logical_and", {gt, m}), b.op("logical_not", {le})});
  ValueId w = b.op("where", {both, xf, b.op("neg", {y})});
  ValueId d = b.cast(w, DType::f64);
  d = b.op("mul", {d, b.full(1.0 / 3.0, DType::f64)});
  ValueId back = b.cast(d, DType::bf16);
  ValueId eq = b.op("eq", {back, x});
  ValueId i = b.cast(w, DType::i32);
  i = b.op("add", {b.op("mul", {i, b.full(3, DType::i32)}), b.cast(gt, DType::i32)});
  ValueId ne = b.op("ne", {i, b.full(0, DType::i32)});
  ValueId h = b.cast(b.op("where", {ne, d, b.op("sign", {d})}), DType::f16);
  check(b.text({back, eq, i, h, b.cast(i, DType::i64)}), "elementwise",
        {spread_tensor(DType::bf16, {16, 33}, 8), spread_tensor(DType::f32, {33}, 9),
         spread_tensor(DType::b8, {16, 1}, 10)});
}

TEST_F(Fused, IntegerArithmeticAndArange) {
  Body b;
  ValueId x = b.in(DType::i64, {5, 40});
  ValueId r = b.op("arange", {}, {{"start", 3.0}, {"stop", 43.0}, {"step", 1.0}, {"dtype", DType::i64}});
  ValueId v = b.op("mul", {b.op("sub", {x, r}), b.op("square", {x})});
  v = b.op("maximum", {v, b.op("neg", {b.op("abs", {x})})});
  ValueId f = b.op("arange", {}, {{"start", 0.5}, {"stop", 20.5}, {"step", 0.5}, {"dtype", DType::bf16}});
  ValueId g = b.op("add", {b.cast(v, DType::bf16), f});
  check(b.text({v, g}), "elementwise", {spread_tensor(DType::i64, {5, 40}, 11)});
}

TEST_F(Fused, LargeInputsSplitAcrossThreadsAndBlocks) {
  Body b;
  ValueId x = b.in(DType::f32, {3, 100003});
  ValueId y = b.in(DType::f32, {100003});
  ValueId v = b.op("silu", {b.op("add", {x, y})});
  std::string body = b.text({b.op("mul", {v, y})});
  std::vector<Tensor> in{spread_tensor(DType::f32, {3, 100003}, 12), spread_tensor(DType::f32, {100003}, 13)};
  check(body, "elementwise", in);
  Body r;
  x = r.in(DType::f32, {3, 100003});
  y = r.in(DType::f32, {100003});
  std::string reduction = r.text({r.reduce("sum", r.op("silu", {r.op("add", {x, y})}), {1})});
  check(reduction, "reduction", in);
  // Same bits whatever the thread count.
  const int threads = num_threads();
  for (CodegenMode mode : {CodegenMode::off, CodegenMode::sync}) {
    set_codegen_mode(mode);
    set_num_threads(1);
    std::vector<Tensor> one = run_fused(body, "elementwise", in), one_r = run_fused(reduction, "reduction", in);
    set_num_threads(threads);
    expect_same_bits(one, run_unfused(body, in), "one thread");
    expect_same_bits(one_r, run_unfused(reduction, in), "one thread");
  }
}

// Both walks of plan.h (rows: the innermost axis reduced; columns: kept),
// one and several chunks per result, partial tiles of the column walk, with
// and without an elementwise output of the full shape.
TEST_F(Fused, ReductionsOverLastMiddleAndAllAxes) {
  struct Case {
    const char* op;
    Shape shape;
    IntList axes;
    bool keepdim;
    DType dtype;
  };
  const Case cases[] = {
      {"sum", {64, 300}, {1}, false, DType::f32},       {"sum", {64, 300}, {0}, false, DType::bf16},
      {"sum", {8, 50, 20}, {1}, true, DType::f32},      {"mean", {8, 50, 20}, {0, 2}, false, DType::f64},
      {"max", {33, 257}, {0}, false, DType::f32},       {"min", {7, 9, 11}, {}, false, DType::bf16},
      {"sum", {3, 10000}, {1}, false, DType::f32},      {"mean", {20000}, {0}, true, DType::bf16},
      {"sum", {2, 4500, 3}, {1}, false, DType::f64},    {"max", {5, 6000}, {-1}, false, DType::f32},
      {"sum", {1, 17, 1}, {2}, false, DType::f32},      {"sum", {10000, 16}, {0}, false, DType::f32},
      {"mean", {4, 3000, 9}, {0, 1}, false, DType::bf16}, {"min", {12, 5, 40}, {0, 1}, true, DType::f16},
  };
  bool with_output = false;
  for (const Case& c : cases) {
    SCOPED_TRACE(cat(c.op, c.shape, " over ", Shape(c.axes)));
    const DType t = c.dtype;
    const Shape row{c.shape[c.shape.size() - 1]};
    std::vector<Tensor> in{spread_tensor(t, c.shape, 14), spread_tensor(t, row, 15)};
    Body b;
    ValueId x = b.in(t, c.shape), y = b.in(t, row);
    with_output = !with_output;
    if (with_output) {
      ValueId v = b.op("sub", {b.op("exp", {x}), y});
      check(b.text({b.reduce(c.op, v, c.axes, c.keepdim), v}), "reduction", in);
    } else {
      ValueId v = b.op("mul", {b.op("tanh", {b.op("add", {x, y})}), b.full(1.5, t)});
      check(b.text({b.reduce(c.op, v, c.axes, c.keepdim)}), "reduction", in);
    }
  }
}

TEST_F(Fused, EmptyAndRankZeroSpaces) {
  Body e;
  ValueId x = e.in(DType::f32, {0, 5});
  ValueId v = e.op("exp", {x});
  check(e.text({e.reduce("sum", v, {0}), v}), "reduction", {spread_tensor(DType::f32, {0, 5}, 24)});
  Body m;
  x = m.in(DType::f32, {0, 5});
  check(m.text({m.reduce("mean", m.op("exp", {x}), {0})}), "reduction", {spread_tensor(DType::f32, {0, 5}, 25)});
  Body z;
  x = z.in(DType::f32, {});
  ValueId w = z.op("add", {z.op("exp", {x}), x});
  check(z.text({w}), "elementwise", {spread_tensor(DType::f32, {}, 26)});
  Body r;
  x = r.in(DType::f64, {});
  check(r.text({r.reduce("sum", r.op("exp", {x}), {})}), "reduction", {spread_tensor(DType::f64, {}, 27)});
}

TEST_F(Fused, IntegerAndBoolReductions) {
  Body b;
  ValueId x = b.in(DType::f32, {12, 70});
  ValueId y = b.in(DType::f32, {70});
  ValueId count = b.reduce("sum", b.op("gt", {x, y}), {1});
  check(b.text({count}), "reduction", {spread_tensor(DType::f32, {12, 70}, 16), spread_tensor(DType::f32, {70}, 17)});
  Body c;
  ValueId i = c.in(DType::i32, {9, 40});
  ValueId sq = c.op("square", {i});
  check(c.text({c.reduce("sum", sq, {0}), sq}), "reduction", {spread_tensor(DType::i32, {9, 40}, 18)});
  Body d;
  i = d.in(DType::i32, {9, 40});
  check(d.text({d.reduce("max", d.op("neg", {i}), {1})}), "reduction", {spread_tensor(DType::i32, {9, 40}, 19)});
}

TEST_F(Fused, ReductionOfABodyInputDirectly) {
  Body b;
  ValueId x = b.in(DType::bf16, {6, 5000});
  check(b.text({b.reduce("sum", x, {1})}), "reduction", {spread_tensor(DType::bf16, {6, 5000}, 20)});
  // With library calls in the body, generated code evaluates in tiles.
  Body c;
  x = c.in(DType::bf16, {6, 5000});
  ValueId e = c.op("add", {c.op("exp", {c.op("tanh", {x})}), x});
  check(c.text({c.reduce("max", x, {1}), e}), "reduction", {spread_tensor(DType::bf16, {6, 5000}, 20)});
}

// Fused nodes in graphs the runtime runs, with views as inputs (the kernel
// takes strided inputs).
TEST_F(Fused, RunsAsAGraphNode) {
  Body b;
  ValueId x = b.in(DType::f32, {40, 24});
  ValueId y = b.in(DType::f32, {40, 24});
  ValueId v = b.op("mul", {b.op("sub", {x, y}), b.full(0.5, DType::f32, {40, 24})});
  v = b.op("silu", {v});
  std::string ew = b.text({v});
  Body r;
  x = r.in(DType::f32, {40, 24});
  ValueId e = r.op("exp", {x});
  std::string red = r.text({r.reduce("sum", e, {0}), e});
  Tensor base = spread_tensor(DType::f32, {24, 40}, 22);
  std::vector<Tensor> in{base.transpose(0, 1), spread_tensor(DType::f32, {40, 24}, 23)};
  for (CodegenMode mode : {CodegenMode::off, CodegenMode::sync}) {
    set_codegen_mode(mode);
    expect_same_bits(run_fused_node(ew, "elementwise", in), run_unfused(ew, in), "elementwise node");
    expect_same_bits(run_fused_node(red, "reduction", {in[1]}), run_unfused(red, {in[1]}), "reduction node");
    expect_same_bits(run_fused_node(red, "reduction", {in[0]}), run_unfused(red, {in[0]}), "reduction of a view");
  }
}

TEST_F(Fused, FirstCallDoesNotWaitForTheCompiler) {
  // A body no earlier run compiled (the constant is unique to this process).
  Body b;
  ValueId x = b.in(DType::f32, {256});
  ValueId v = b.op("add", {b.op("exp", {x}), b.full(double(getpid()) + 0.25, DType::f32, {256})});
  std::string body = b.text({b.op("sqrt", {b.op("abs", {v})})});
  std::vector<Tensor> in{spread_tensor(DType::f32, {256}, 21)};
  std::vector<Tensor> want = run_unfused(body, in);

  set_codegen_mode(CodegenMode::async);
  FusedStats before = fused_stats();
  std::vector<Tensor> first = run_fused_node(body, "elementwise", in);
  auto returned = std::chrono::steady_clock::now();
  EXPECT_EQ(fused_stats().interpreted, before.interpreted + 1);
  expect_same_bits(first, want, "first call");

  CodegenStatus s = wait_for_codegen(body, "elementwise", std::chrono::minutes(5));
  ASSERT_EQ(s.state, CodegenState::ready) << s.error;
  EXPECT_GT(s.ready_at, returned) << "the first call returned only after the shared object existed";
  EXPECT_GE(fused_stats().builds, before.builds + 1);

  before = fused_stats();
  expect_same_bits(run_fused_node(body, "elementwise", in), want, "after the build");
  EXPECT_EQ(fused_stats().generated, before.generated + 1);
}

TEST_F(Fused, ACompiledProgramStartsItsBuildsBeforeItsFirstCall) {
  // A body no earlier run compiled (the constant is unique to this process).
  Body b;
  ValueId x = b.in(DType::f32, {64});
  std::string body = b.text({b.op("mul", {b.op("tanh", {x}), b.full(double(getpid()) + 0.75, DType::f32, {64})})});
  ir::Graph g;
  const ir::Node& n = g.add_node(fused_op(), {g.add_input({DType::f32, {64}})}, {{"body", body}, {"kind", "elementwise"}});
  g.set_outputs(n.outputs);

  set_codegen_mode(CodegenMode::off);
  { Executable off(g, kCPU, {}); }
  EXPECT_EQ(codegen_status(body, "elementwise").state, CodegenState::none) << "built with codegen off";

  set_codegen_mode(CodegenMode::async);
  const FusedStats before = fused_stats();
  Executable exe(g, kCPU, {});
  EXPECT_NE(codegen_status(body, "elementwise").state, CodegenState::none) << "the constructor started nothing";
  Executable again(g, kCPU, {});  // prepared twice: built once
  CodegenStatus s = wait_for_codegen(body, "elementwise", std::chrono::minutes(5));
  ASSERT_EQ(s.state, CodegenState::ready) << s.error;
  EXPECT_LE(fused_stats().loads, before.loads + 1);
  EXPECT_EQ(fused_stats().interpreted, before.interpreted) << "nothing ran yet";
}

// A process that exits while its compiler runs, or while the build's files
// are being written, stops the compiler and leaves no files behind.
TEST(FusedExit, StopsTheCompilerAndLeavesNoFiles) {
  namespace fs = std::filesystem;
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-runs this test up to here
  if (!std::getenv("KILN_FUSED_EXIT_TEST_DIR")) {
    char d[] = "/tmp/kiln-fused-exit-XXXXXX";
    ASSERT_TRUE(mkdtemp(d));
    setenv("KILN_FUSED_EXIT_TEST_DIR", d, 1);
  }
  const std::string dir = std::getenv("KILN_FUSED_EXIT_TEST_DIR");
  // Starts a build and exits the moment `dir` holds a file named `trigger`.
  auto child = [&](const std::string& trigger) {
    setenv("TMPDIR", dir.c_str(), 1);
    set_codegen_mode(CodegenMode::async);
    Body b;
    ValueId x = b.in(DType::f32, {4});
    std::string body = b.text({b.op("add", {b.op("exp", {x}), b.full(getpid() + 0.5, DType::f32, {4})})});
    float in[4] = {}, out[4] = {};
    TensorRef i{in, DType::f32, {4}, {1}}, o{out, DType::f32, {4}, {1}};
    ir::Attrs attrs{{"body", body}, {"kind", std::string("elementwise")}};
    find_kernel(DeviceKind::cpu, "fused")->fn(KernelArgs{{&i, 1}, {&o, 1}, attrs, fused_op()});
    auto seen = [&] {
      try {
        for (const auto& e : fs::recursive_directory_iterator(dir))
          if (e.path().filename().string().starts_with(trigger)) return true;
      } catch (const fs::filesystem_error&) {  // a directory went away meanwhile
      }
      return false;
    };
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < give_up)
      if (seen()) std::exit(0);
    std::exit(3);
  };
  auto expect_empty = [&] {
    bool empty = false;
    for (int i = 0; i < 500 && !empty; ++i) {  // the compiler's processes end after the child
      empty = fs::is_empty(dir);
      if (!empty) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(empty) << dir << " still holds files";
  };
  // While the compiler runs.
  EXPECT_EXIT(child("kernel.cc"), ::testing::ExitedWithCode(0), "");
  expect_empty();
  // As soon as the build's directory exists: its source is being written.
  for (int round = 0; round < 5; ++round) {
    EXPECT_EXIT(child("kiln-fused-"), ::testing::ExitedWithCode(0), "");
    expect_empty();
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  unsetenv("KILN_FUSED_EXIT_TEST_DIR");
}

// The directories of killed processes go with a later process's first
// build; those of live processes, and recent ones, stay.
TEST(FusedExit, ALaterBuildRemovesTheDirectoriesOfKilledProcesses) {
  namespace fs = std::filesystem;
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child is a fresh process
  if (!std::getenv("KILN_FUSED_SWEEP_TEST_DIR")) {
    char d[] = "/tmp/kiln-sweep-test-XXXXXX";
    ASSERT_TRUE(mkdtemp(d));
    setenv("KILN_FUSED_SWEEP_TEST_DIR", d, 1);
  }
  const fs::path dir = std::getenv("KILN_FUSED_SWEEP_TEST_DIR");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  const auto hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  auto make = [&](const std::string& name, bool old) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "kernel.cc") << "int x;";
    if (old) fs::last_write_time(dir / name, hour_ago);
    return dir / name;
  };
  const std::string dead_prefix = "kiln-fused-" + std::to_string(dead) + "-";
  const fs::path killed = make(dead_prefix + "aaaaaa", true);
  const fs::path recent = make(dead_prefix + "bbbbbb", false);
  const fs::path live = make("kiln-fused-" + std::to_string(getpid()) + "-cccccc", true);
  const fs::path other = make("kiln-fused-exit-dddddd", true);
  EXPECT_EXIT(
      {
        setenv("TMPDIR", dir.c_str(), 1);
        build_shared_object("extern \"C\" int kiln_sweep_test() { return 1; }");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_FALSE(fs::exists(killed)) << "a killed process's directory stayed";
  EXPECT_TRUE(fs::exists(recent)) << "a recent directory went";
  EXPECT_TRUE(fs::exists(live)) << "a live process's directory went";
  EXPECT_TRUE(fs::exists(other)) << "a directory not named by a build went";
  std::error_code ec;
  fs::remove_all(dir, ec);
  unsetenv("KILN_FUSED_SWEEP_TEST_DIR");
}

TEST_F(Fused, GeneratedSourceEmbedsTheMathHeaders) {
  Body b;
  ValueId x = b.in(DType::f32, {4});
  std::string src = generate_source(codegen::make_plan(b.text({b.op("exp", {x})}), "elementwise"));
  EXPECT_NE(src.find("struct Exp"), std::string::npos);
  EXPECT_NE(src.find("kiln::codegen::Exp{}("), std::string::npos);
  EXPECT_EQ(src.find("#include \"kiln/"), std::string::npos) << "needs the kiln source tree";
}

TEST_F(Fused, CompilerFailuresAreReported) {
  try {
    build_shared_object("this is not C++");
    FAIL() << "compiled";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("the C++ compiler failed"), std::string::npos) << m;
    EXPECT_NE(m.find("error"), std::string::npos) << "no diagnostics: " << m;
  }
}

// Bad bodies, run through the kernel directly so that its own checks speak.
std::string kernel_error(const std::string& body, const std::string& kind,
                         std::vector<TensorRef> in, std::vector<TensorRef> out) {
  const Kernel* k = find_kernel(DeviceKind::cpu, "fused");
  EXPECT_NE(k, nullptr);
  ir::Attrs attrs{{"body", body}, {"kind", kind}};
  try {
    k->fn(KernelArgs{in, out, attrs, fused_op()});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(Fused, BadBodiesGiveClearErrors) {
  set_codegen_mode(CodegenMode::off);
  float a[16] = {}, c[16] = {};
  TensorRef x{a, DType::f32, {4, 4}, {4, 1}}, y{c, DType::f32, {4, 4}, {4, 1}};
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg;
  };
  {
    Body b;
    ValueId p = b.in(DType::f32, {4, 4});
    ValueId m = b.op("matmul", {p, p});
    has(kernel_error(b.text({m}), "elementwise", {x}, {y}), "op 'matmul' cannot run inside a fused kernel");
  }
  {
    Body b;
    ValueId p = b.in(DType::f32, {4, 4});
    ValueId s = b.reduce("sum", p, {1});
    has(kernel_error(b.text({s}), "elementwise", {x}, {y}), "give the node kind \"reduction\"");
  }
  {
    Body b;
    ValueId p = b.in(DType::f32, {4, 4});
    has(kernel_error(b.text({b.op("exp", {p})}), "reduction", {x}, {y}), "holds no reduction");
  }
  {
    Body b;
    ValueId p = b.in(DType::f32, {4, 4});
    ValueId s = b.reduce("sum", p, {1}, true);
    ValueId e = b.op("exp", {s});
    has(kernel_error(b.text({e}), "reduction", {x}, {y}), "must be the body's last node");
  }
  {
    Body b;
    ValueId p = b.in(DType::f32, {4, 4});
    has(kernel_error(b.text({p}), "elementwise", {x}, {y}), "is a body input");
  }
  has(kernel_error("graph(%0: f32[4,4]) {\n  %1: f32[4,4] = exp(%0\n  return %1\n}\n", "elementwise",
                   {x}, {y}),
      "the body is not a valid graph");
  has(kernel_error("graph(%0: f32[4,4]) {\n  return %0\n}\n", "fancy", {x}, {y}),
      "kind must be \"elementwise\" or \"reduction\"");
  {
    Body b;
    ValueId p = b.in(DType::f32, {4, 4});
    TensorRef wrong{a, DType::bf16, {4, 4}, {4, 1}};
    has(kernel_error(b.text({b.op("exp", {p})}), "elementwise", {wrong}, {y}), "input 0 is bf16[4,4]");
  }
}

}  // namespace
}  // namespace kiln::cpu::fused
