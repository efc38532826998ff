// Random graphs for property tests of the compiler passes, and a way to run
// graphs (fused ones too, by inlining their bodies) to compare results.
#pragma once
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/compiler/fused_op.h"
#include "kiln/compiler/rewriter.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/tensor.h"

namespace kiln::compiler::test {

// A random f32 graph over inputs [4,8], [8], [8,8], [4,1]: elementwise
// chains with broadcasting and scalar constants, matmuls, sum/max/mean,
// transposes, reshapes, cast round trips, duplicated nodes and, when
// `collectives`, all_reduces (mesh axes "a0", "a1", ... in program order).
inline ir::Graph random_graph(uint32_t seed, bool collectives = false, int steps = 40) {
  std::mt19937 rng(seed);
  auto coin = [&](int n) { return int(rng() % uint32_t(n)); };
  ir::Graph g;
  std::vector<ir::ValueId> vals;
  for (Shape s : {Shape{4, 8}, Shape{8}, Shape{8, 8}, Shape{4, 1}}) vals.push_back(g.add_input({DType::f32, s}));
  auto add = [&](const char* op, std::vector<ir::ValueId> in, const ir::Attrs& attrs = {}) {
    ir::ValueId v = g.add_node(ir::get_op(op), std::move(in), attrs).outputs[0];
    vals.push_back(v);
    return v;
  };
  // Mostly recent values, so that chains form.
  auto pick = [&] { return coin(3) ? vals[vals.size() - 1 - coin(std::min<int>(4, int(vals.size())))] : vals[coin(int(vals.size()))]; };
  auto shape = [&](ir::ValueId v) { return g.type(v).shape; };
  auto partner = [&](ir::ValueId a) {
    for (int tries = 0; tries < 20; ++tries) {
      ir::ValueId b = pick();
      try {
        broadcast_shapes(shape(a), shape(b), "random graph");
        return b;
      } catch (const Error&) {
      }
    }
    return a;
  };
  const char* unary[] = {"tanh", "sigmoid", "neg", "abs", "sin", "copy"};
  const char* binary[] = {"add", "mul", "sub", "maximum"};
  int axis_names = 0;
  for (int step = 0; step < steps; ++step) {
    ir::ValueId a = pick();
    switch (coin(11)) {
      case 0: case 1: case 2: add(unary[coin(6)], {a}); break;
      case 3: case 4: add(binary[coin(4)], {a, partner(a)}); break;
      case 5: {
        double values[] = {0.0, 1.0, 0.5, 2.0};
        ir::ValueId c = g.add_node(ir::get_op("full"), {}, {{"shape", ir::IntList{}}, {"value", values[coin(4)]}}).outputs[0];
        add(binary[coin(4)], coin(2) ? std::vector{a, c} : std::vector{c, a});
        break;
      }
      case 6:
        if (shape(a).size() == 2 && shape(a)[1] == 8) add("matmul", {a, vals[2]});
        break;
      case 7:
        if (shape(a).size() == 2) {
          const char* red[] = {"sum", "max", "mean"};
          if (coin(2)) add(red[coin(3)], {a}, {{"axes", ir::IntList{1}}, {"keepdim", true}});
          else add(red[coin(3)], {a}, {{"axes", ir::IntList{0}}});
        }
        break;
      case 8:
        if (shape(a).size() == 2) {
          ir::ValueId t = add("permute", {a}, {{"dims", ir::IntList{1, 0}}});
          if (coin(2)) add("permute", {t}, {{"dims", ir::IntList{1, 0}}});
        } else {
          ir::ValueId r = add("reshape", {a}, {{"shape", ir::IntList{1, shape(a).numel()}}});
          add("reshape", {r}, {{"shape", shape(a).vec()}});
        }
        break;
      case 9: {
        ir::ValueId c = add("cast", {a}, {{"dtype", DType::f64}});
        vals.pop_back();  // only f32 values feed other ops
        add("cast", {c}, {{"dtype", DType::f32}});
        break;
      }
      case 10:
        if (collectives) add("all_reduce", {a}, {{"mesh_axis", cat("a", axis_names++)}, {"group_size", int64_t{2}}});
        else add("sigmoid", {a});
        break;
    }
  }
  // A duplicate of some node, for CSE.
  const ir::Node& n = g.nodes()[coin(int(g.nodes().size()))];
  if (n.outputs.size() == 1 && !n.op->side_effects) {
    ir::Node copy = n;
    vals.push_back(g.add_node(*copy.op, copy.inputs, copy.attrs).outputs[0]);
  }
  std::vector<ir::ValueId> outs{vals.back()};
  for (int i = 0; i < 2; ++i) outs.push_back(vals[coin(int(vals.size()))]);
  g.set_outputs(outs);
  return g;
}

// The mesh axes of the all_reduces of `g` (or of their starts, once
// scheduled), in node order.
inline std::vector<std::string> collective_order(const ir::Graph& g) {
  std::vector<std::string> axes;
  for (const ir::Node& n : g.nodes())
    if (n.op->side_effects && n.attrs.find("mesh_axis")) axes.push_back(n.attrs.s("mesh_axis"));
  return axes;
}

// `g` with every fused node replaced by its body's nodes: what fusion means.
inline ir::Graph inline_fused(const ir::Graph& g) {
  Rewriter rw(g);
  for (const ir::Node& n : g.nodes()) {
    if (n.op != &fused_op()) {
      rw.copy(n);
      continue;
    }
    std::shared_ptr<const ir::Graph> body = fused_body(n.attrs.s("body"));
    std::vector<ir::ValueId> local(body->values().size(), -1);
    for (size_t i = 0; i < n.inputs.size(); ++i) local[body->inputs()[i]] = rw[n.inputs[i]];
    for (const ir::Node& b : body->nodes()) {
      std::vector<ir::ValueId> in;
      for (ir::ValueId v : b.inputs) in.push_back(local[v]);
      const ir::Node& c = rw.graph().add_node(*b.op, in, b.attrs);
      for (size_t k = 0; k < b.outputs.size(); ++k) local[b.outputs[k]] = c.outputs[k];
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) rw.alias(n.outputs[k], local[body->outputs()[k]]);
  }
  return rw.finish();
}

// Deterministic inputs for `g`'s f32 inputs, in [-1, 1).
inline std::vector<Tensor> inputs_for(const ir::Graph& g) {
  std::vector<Tensor> in;
  uint32_t state = 1;
  for (ir::ValueId v : g.inputs()) {
    const Shape& s = g.type(v).shape;
    std::vector<float> data(size_t(s.numel()));
    for (float& x : data) {
      state = state * 1103515245u + 12345u;
      x = float((state >> 16) & 0xff) / 128.0f - 1.0f;
    }
    in.push_back(from_vector(data, s));
  }
  return in;
}

// Runs `g` eagerly (inlining fused nodes) and returns its outputs.
inline std::vector<std::vector<float>> evaluate(const ir::Graph& g) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : run_graph(inline_fused(g), inputs_for(g), "compiler test"))
    out.push_back(t.to_vector<float>());
  return out;
}

// Equal as numbers (so -0 == +0, the one change simplify allows), NaN == NaN.
inline ::testing::AssertionResult same_results(const std::vector<std::vector<float>>& a,
                                               const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " outputs";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return ::testing::AssertionFailure() << "output " << i << " sizes differ";
    for (size_t k = 0; k < a[i].size(); ++k)
      if (!(a[i][k] == b[i][k] || (std::isnan(a[i][k]) && std::isnan(b[i][k]))))
        return ::testing::AssertionFailure() << "output " << i << " element " << k << ": " << a[i][k]
                                             << " vs " << b[i][k];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::compiler::test
