// CUDA's generated kernels against the CPU (ctest label cuda; needs a GPU):
// every elementwise op in every dtype it takes, full and arange, the
// reductions sum, mean, max and min over each walk, and the fused nodes the
// compiler makes of random graphs give the CPU's results, and the same bits
// on every run. The two variants of a kernel (codegen.h: specialised, which
// fused nodes in their natural layout run, and shape-generic, which eager
// ops run) give the same bits on the same inputs: they fold in one order.
//
// Integer and bool results, max and min (selections) and casts are compared
// bit for bit. Float results of math may differ: CUDA's math library (expf,
// tanhf, ...) is not the C library (both within ~2 ulp of the true value),
// which can also flip a 16-bit rounding, and sums fold in another order. They
// must agree within tolerance(dtype) * (|cpu| + scale), scale being 1 for
// elementwise values and the sum of |x| over a sum's elements (what bounds
// any order's rounding error).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/codegen/elementwise_ops.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/tensor.h"
#include "tests/backend/cuda/against_cpu.h"
#include "tests/backend/cuda/codegen_cases.h"
#include "tests/support/spread_values.h"

namespace kiln::cuda {
namespace {

constexpr Device kGpu{DeviceKind::cuda, 0};

// The stated tolerances (see the top of the file).
double tolerance(DType t) {
  switch (t) {
    case DType::f32: return 1e-5;
    case DType::f64: return 1e-12;
    case DType::bf16: return 1.0 / 128;  // one bf16 ulp
    case DType::f16: return 1.0 / 1024;  // one f16 ulp
    default: return 0;                   // exact
  }
}

using test::element_bytes;
using test::spread_tensor;

// `gpu` (on the CPU again) against `cpu`; exact unless `approximate`.
void expect_close(const Tensor& gpu, const Tensor& cpu, bool approximate, const std::string& what,
                  const std::vector<double>& scale = {}) {
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  if (!approximate || !is_floating(cpu.dtype())) {
    EXPECT_EQ(element_bytes(gpu), element_bytes(cpu)) << what << ": not bit-identical";
    return;
  }
  const std::vector<double> a = gpu.to_vector<double>(), b = cpu.to_vector<double>();
  const double tol = tolerance(cpu.dtype());
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;  // infinities too
    const double bound = tol * (std::abs(b[i]) + (scale.empty() ? 1.0 : scale[i]));
    if (!(std::abs(a[i] - b[i]) <= bound) && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << ": cuda " << a[i] << ", cpu " << b[i] << " (bound "
                    << bound << ")";
  }
}

// Runs `op` on the CPU and on CUDA over the same inputs, twice on CUDA; the
// two CUDA runs must be the same bits. Returns false if the CPU refuses the
// inputs (a dtype the op does not take).
struct Run {
  std::vector<Tensor> cpu, gpu;
};
std::optional<Run> run_both(const ir::OpDef& op, const std::vector<Tensor>& inputs, const ir::Attrs& attrs,
                            const std::string& what) {
  Run r;
  try {
    r.cpu = apply(op, inputs, attrs, kCPU);
  } catch (const Error&) {
    return std::nullopt;
  }
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.to(kGpu));
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> out = apply(op, on_gpu, attrs, kGpu);
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].device(), kGpu) << what;
      Tensor back = out[i].to(kCPU);
      if (run == 0) r.gpu.push_back(back);
      else EXPECT_EQ(element_bytes(back), element_bytes(r.gpu[i])) << what << ": output " << i << " differs between runs";
    }
  }
  return r;
}

const ir::OpDef& op(const char* name) { return ir::get_op(name); }

TEST(FusedCuda, EveryElementwiseOpInEveryDtype) {
  int ran = 0;
  for (DType t : kAllDTypes) {
    // Enough positions for several blocks of the grid-stride loop; the
    // second input broadcasts.
    const Tensor x = spread_tensor(t, {37, 1029}, 1), y = spread_tensor(t, {1029}, 2);
    std::vector<std::string> names = test::unary_op_names();
    for (const std::string& b : test::binary_op_names()) names.push_back(b);
    for (const std::string& name : names) {
      const ir::OpDef& o = op(name.c_str());
      std::vector<Tensor> in{x};
      if (o.num_inputs == 2) in.push_back(y);
      const std::string what = cat(name, " ", dtype_name(t));
      if (auto r = run_both(o, in, {}, what)) {
        expect_close(r->gpu[0], r->cpu[0], true, what);
        ++ran;
      }
    }
    for (bool tanh : {false, true})
      if (auto r = run_both(op("gelu"), {x}, {{"tanh_approximation", tanh}}, cat("gelu ", dtype_name(t))))
        expect_close(r->gpu[0], r->cpu[0], true, cat("gelu ", dtype_name(t)));
    const Tensor c = spread_tensor(DType::b8, {37, 1029}, 3);
    if (auto r = run_both(op("where"), {c, x, y}, {}, cat("where ", dtype_name(t))))
      expect_close(r->gpu[0], r->cpu[0], false, cat("where ", dtype_name(t)));
    for (DType to : kAllDTypes)
      if (auto r = run_both(op("cast"), {x}, {{"dtype", to}}, cat("cast ", dtype_name(t), " ", dtype_name(to))))
        expect_close(r->gpu[0], r->cpu[0], false, cat("cast ", dtype_name(t), " ", dtype_name(to)));
  }
  EXPECT_GT(ran, 100);
}

TEST(FusedCuda, StridedInputsRunInTheirLayout) {
  // A transposed view: a kernel generated for that layout, no copy.
  const Tensor x = spread_tensor(DType::f32, {64, 48}, 4), y = spread_tensor(DType::f32, {48, 64}, 5);
  const ir::Attrs t{{"dims", ir::IntList{1, 0}}};
  const Tensor cpu = apply1(op("add"), {apply1(op("permute"), {x}, t), y});
  const Tensor gpu = apply1(op("add"), {apply1(op("permute"), {x.to(kGpu)}, t), y.to(kGpu)});
  expect_close(gpu.to(kCPU), cpu, false, "add of a transpose");
}

TEST(FusedCuda, CreationOps) {
  for (DType t : kAllDTypes) {
    const ir::Attrs full{{"shape", ir::IntList{5, 300}}, {"value", 2.75}, {"dtype", t}};
    expect_close(apply1(op("full"), {}, full, kGpu).to(kCPU), apply1(op("full"), {}, full, kCPU), false,
                 cat("full ", dtype_name(t)));
    if (t == DType::b8) continue;
    const ir::Attrs arange{{"start", -3.0}, {"stop", 997.0}, {"step", 0.5}, {"dtype", t}};
    expect_close(apply1(op("arange"), {}, arange, kGpu).to(kCPU), apply1(op("arange"), {}, arange, kCPU),
                 false, cat("arange ", dtype_name(t)));
  }
}

TEST(FusedCuda, ReductionsOverEveryWalk) {
  for (const char* name : {"sum", "mean", "max", "min"})
    for (DType t : kAllDTypes)
      for (const test::Walk& w : test::reduction_walks()) {
        const Tensor x = spread_tensor(t, w.shape, 6);
        const ir::Attrs attrs{{"axes", w.axes}, {"keepdim", w.keepdim}};
        const std::string what = cat(name, " ", dtype_name(t), " ", w.name);
        auto r = run_both(op(name), {x}, attrs, what);
        if (!r) continue;
        const bool sum = std::string(name) == "sum" || std::string(name) == "mean";
        std::vector<double> scale;
        if (sum && is_floating(t)) {
          scale = apply1(op("sum"), {apply1(op("abs"), {x.to(DType::f64)})}, attrs).to_vector<double>();
          if (std::string(name) == "mean")
            for (double& s : scale) s /= double(x.shape().numel()) / double(r->cpu[0].shape().numel());
        }
        expect_close(r->gpu[0], r->cpu[0], sum, what, scale);
      }
}

// `name` as a compiler-made fused node of that one node, on CUDA: the
// specialised kernels, where the eager op runs the shape-generic ones.
Tensor as_fused_node(const char* name, const std::vector<Tensor>& in, const ir::Attrs& attrs,
                     const std::string& kind) {
  ir::Graph g;
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : in) ids.push_back(g.add_input(t.type()));
  g.set_outputs(g.add_node(op(name), ids, attrs).outputs);
  return apply1(op("fused"), in, {{"body", ir::to_text(g)}, {"kind", kind}}, kGpu);
}

TEST(FusedCuda, SpecialisedAndShapeGenericKernelsGiveTheSameBits) {
  struct Case {
    Shape shape;
    ir::IntList axes;
  };
  const Case cases[] = {{{6, 300}, {1}}, {{300, 40}, {0}}, {{3, 40000}, {1}}, {{40000, 16}, {0}}, {{4, 50, 6}, {1}}};
  for (const char* name : {"sum", "mean", "max", "min"})
    for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32})
      for (const Case& c : cases) {
        if (t == DType::i32 && std::string(name) == "mean") continue;
        const Tensor x = spread_tensor(t, c.shape, 7).to(kGpu);
        const ir::Attrs attrs{{"axes", c.axes}, {"keepdim", false}};
        const std::string what = cat(name, " ", dtype_name(t), " ", c.shape);
        EXPECT_EQ(element_bytes(apply1(op(name), {x}, attrs, kGpu).to(kCPU)),
                  element_bytes(as_fused_node(name, {x}, attrs, "reduction").to(kCPU)))
            << what;
      }
  for (const char* name : {"add", "mul", "div", "exp", "tanh", "silu"}) {
    const bool unary = std::string(name) != "add" && std::string(name) != "mul" && std::string(name) != "div";
    for (DType t : {DType::f32, DType::bf16}) {
      std::vector<Tensor> in{spread_tensor(t, {37, 129}, 8).to(kGpu)};
      if (!unary) in.push_back(spread_tensor(t, {129}, 9).to(kGpu));
      EXPECT_EQ(element_bytes(apply1(op(name), in, {}, kGpu).to(kCPU)),
                element_bytes(as_fused_node(name, in, {}, "elementwise").to(kCPU)))
          << name << " " << dtype_name(t);
    }
  }
}

TEST(FusedCuda, MaxAndMinPropagateNaN) {
  std::vector<float> v(3 * 40000, 1.0f);
  v[5] = std::numeric_limits<float>::quiet_NaN();                 // result 0, first chunk
  v[40000 + 39999] = std::numeric_limits<float>::quiet_NaN();     // result 1, last chunk
  const Tensor x = from_vector(v, {3, 40000});
  for (const char* name : {"max", "min"}) {
    auto r = run_both(op(name), {x}, {{"axes", ir::IntList{1}}}, name);
    ASSERT_TRUE(r);
    const std::vector<float> got = r->gpu[0].to_vector<float>();
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1])) << name;
    EXPECT_EQ(got[2], 1.0f) << name;
  }
}

TEST(FusedCuda, FusedNodesOfRandomGraphs) {
  int fused = 0;
  test::for_each_random_fused_node(30, [&](uint32_t seed, const ir::Node& n, const std::vector<Tensor>& in) {
    const std::string what = cat("seed ", seed, " node ", fused++, "\n", n.attrs.s("body"));
    auto r = run_both(*n.op, in, n.attrs, what);
    ASSERT_TRUE(r) << what;
    for (size_t i = 0; i < r->cpu.size(); ++i) expect_close(r->gpu[i], r->cpu[i], true, what);
  });
  EXPECT_GT(fused, 30);
}

}  // namespace
}  // namespace kiln::cuda
