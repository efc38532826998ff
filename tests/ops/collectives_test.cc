// Collective ops: shape rules, errors, and the adjoint collectives their vjp
// rules put in the backward graph. They run only on a device mesh
// (tests/dist runs them under mpirun), so everything here is traced.
#include "kiln/ops/collectives.h"

#include <gtest/gtest.h>

#include <functional>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/recording.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::expect_error;

const MeshAxis kDp{"dp", 4};

// Traces fn on pending f32 inputs of the given shapes and returns its result's type.
ir::TypeInfo traced_type(const Shape& shape, const std::function<Tensor(const Tensor&)>& fn) {
  auto rec = Recording::create();
  Tensor x = rec->tensor(rec->capture(zeros(shape)), kCPU);
  ContextGuard trace(std::make_shared<TraceContext>(rec));
  return fn(x).type();
}

TEST(Collectives, ShapeRules) {
  auto type = [](const Shape& s, auto fn) { return traced_type(s, fn).shape; };
  EXPECT_EQ(type({2, 3}, [](const Tensor& x) { return all_reduce(x, kDp); }), (Shape{2, 3}));
  EXPECT_EQ(type({2, 3}, [](const Tensor& x) { return all_gather(x, 0, kDp); }), (Shape{8, 3}));
  EXPECT_EQ(type({2, 3}, [](const Tensor& x) { return all_gather(x, -1, kDp); }), (Shape{2, 12}));
  EXPECT_EQ(type({8, 3}, [](const Tensor& x) { return reduce_scatter(x, 0, kDp); }), (Shape{2, 3}));
  EXPECT_EQ(type({3, 8}, [](const Tensor& x) { return reduce_scatter(x, 1, kDp, ReduceOp::avg); }),
            (Shape{3, 2}));
  EXPECT_EQ(type({8, 3}, [](const Tensor& x) { return all_to_all(x, 0, 1, kDp); }), (Shape{2, 12}));
  EXPECT_EQ(type({8, 3}, [](const Tensor& x) { return all_to_all(x, 0, 0, kDp); }), (Shape{8, 3}));
  EXPECT_EQ(type({5}, [](const Tensor& x) { return broadcast(x, 3, kDp); }), (Shape{5}));
  EXPECT_EQ(type({5}, [](const Tensor& x) { return reduce(x, 0, kDp); }), (Shape{5}));
  ir::TypeInfo cast = traced_type({2, 3}, [](const Tensor& x) {
    return all_gather(x, 0, kDp, DType::bf16);
  });
  EXPECT_EQ(cast, (ir::TypeInfo{DType::bf16, {8, 3}}));
  // A group of one: every collective keeps the shape.
  EXPECT_EQ(type({3}, [](const Tensor& x) { return all_gather(x, 0, {"tp", 1}); }), (Shape{3}));
}

TEST(Collectives, DeclaredWithSideEffectsAndCollectiveFusion) {
  for (const char* name :
       {"all_reduce", "all_gather", "all_gather_cast", "reduce_scatter", "all_to_all", "broadcast",
        "reduce"}) {
    const ir::OpDef& op = ir::get_op(name);
    EXPECT_TRUE(op.side_effects) << name;
    EXPECT_EQ(op.fusion, ir::FusionClass::collective) << name;
    EXPECT_TRUE(bool(op.vjp)) << name;
    EXPECT_FALSE(bool(op.composite)) << name;
  }
}

TEST(Collectives, ShapeAndAttributeErrors) {
  auto trace = [](const Shape& s, std::function<Tensor(const Tensor&)> fn) {
    return [s, fn] { traced_type(s, fn); };
  };
  expect_error(trace({6, 3}, [](const Tensor& x) { return reduce_scatter(x, 0, kDp); }),
               "does not divide into 4");
  expect_error(trace({6, 3}, [](const Tensor& x) { return all_to_all(x, 0, 1, kDp); }),
               "does not divide into 4");
  expect_error(trace({2, 3}, [](const Tensor& x) { return all_gather(x, 2, kDp); }), "all_gather");
  expect_error(trace({2},
                     [](const Tensor& x) {
                       return all_reduce(x, {"dp", 0});
                     }),
               "group_size 0");
  expect_error(trace({2}, [](const Tensor& x) { return all_reduce(x, {"", 2}); }), "mesh_axis");
  expect_error(trace({2}, [](const Tensor& x) { return broadcast(x, 4, kDp); }), "root 4");
  expect_error(trace({2}, [](const Tensor& x) { return reduce(x, -1, kDp); }), "root -1");
  expect_error(trace({2}, [](const Tensor& x) { return all_gather(x, 0, kDp, DType::i32); }),
               "all_gather_cast: casts a floating tensor");
  expect_error(trace({2}, [](const Tensor& x) { return all_reduce(x.to(DType::b8), kDp); }),
               "bool");
  expect_error(
      trace({2}, [](const Tensor& x) { return all_reduce(x.to(DType::i32), kDp, ReduceOp::avg); }),
      "avg needs a floating");
}

TEST(Collectives, EagerCallSaysItNeedsAProcessGroup) {
  // Without a device mesh the kernels raise, at the next synchronisation.
  expect_error([] { all_gather(zeros({2}), 0, kDp).to_vector<float>(); },
               "collective 'all_gather' over mesh axis 'dp' needs a device mesh");
  expect_error([] { all_reduce(zeros({2}), kDp).to_vector<float>(); },
               "run only under a process group");
  // Shape errors still come first, at the call.
  expect_error([] { reduce_scatter(zeros({3}), 0, kDp); }, "does not divide");
  // value_and_grad records the collectives fine; running the graph raises.
  auto vag = value_and_grad([](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(all_gather(a[0], 0, kDp))};
  });
  expect_error([&] { vag({ones({2})}).values[0].item<float>(); },
               "collective 'all_gather' over mesh axis 'dp' needs a device mesh");
}

// The backward of sum(fn(x) * c): returns the gradient's producing node.
struct Backward {
  std::shared_ptr<Recording> rec;
  ir::ValueId grad;
  const ir::Node& producer() const {
    return rec->graph.nodes().at(size_t(rec->graph.values().at(size_t(grad)).node));
  }
  const ir::Node& producer_of(const ir::Node& n, size_t input) const {
    return rec->graph.nodes().at(size_t(rec->graph.values().at(size_t(n.inputs[input])).node));
  }
};

Backward backward_of(const Shape& shape, const std::function<Tensor(const Tensor&)>& fn) {
  auto rec = Recording::create();
  Tensor x = rec->tensor(rec->capture(zeros(shape)), kCPU);
  ContextGuard trace(std::make_shared<TraceContext>(rec));
  Tensor y = fn(x);
  Tensor loss = sum(y * full(y.shape(), 2.0));
  Tensor g = append_backward(*rec, loss, {x})[0];
  EXPECT_EQ(g.type(), x.type());
  ir::verify(rec->graph);
  return {rec, rec->value_of(g)};
}

void expect_group(const ir::Node& n, const char* op) {
  EXPECT_EQ(n.op->name, op);
  EXPECT_EQ(n.attrs.s("mesh_axis"), "dp");
  EXPECT_EQ(n.attrs.i("group_size"), 4);
}

TEST(Collectives, AllGatherAndReduceScatterAreEachOthersAdjoint) {
  Backward b = backward_of({2, 3}, [](const Tensor& x) { return all_gather(x, 1, kDp); });
  expect_group(b.producer(), "reduce_scatter");
  EXPECT_EQ(b.producer().attrs.i("scatter_dim"), 1);
  EXPECT_EQ(b.producer().attrs.s("op"), "sum");

  b = backward_of({8, 3}, [](const Tensor& x) { return reduce_scatter(x, 0, kDp); });
  expect_group(b.producer(), "all_gather");
  EXPECT_EQ(b.producer().attrs.i("gather_dim"), 0);

  // avg: the gathered cotangent divided by the group size.
  b = backward_of({8, 3}, [](const Tensor& x) { return reduce_scatter(x, 0, kDp, ReduceOp::avg); });
  EXPECT_EQ(b.producer().op->name, "div");
  expect_group(b.producer_of(b.producer(), 0), "all_gather");
}

TEST(Collectives, AllGatherCastReduceScattersInTheInputDtype) {
  // An f32 shard gathered in bf16: the bf16 cotangent is cast to f32 first.
  Backward b = backward_of(
      {2, 3}, [](const Tensor& x) { return all_gather(x, 0, kDp, DType::bf16).to(DType::f32); });
  expect_group(b.producer(), "reduce_scatter");
  const ir::Node& cast = b.producer_of(b.producer(), 0);
  EXPECT_EQ(cast.op->name, "cast");
  EXPECT_EQ(cast.attrs.dtype("dtype"), DType::f32);
  // Gathering in the input's own dtype is the plain all_gather.
  b = backward_of({2, 3}, [](const Tensor& x) { return all_gather(x, 0, kDp, DType::f32); });
  for (const ir::Node& n : b.rec->graph.nodes())
    EXPECT_TRUE(n.op->name != "all_gather_cast" && n.op->name != "cast") << n.op->name;
}

TEST(Collectives, AllReduceIsSelfAdjoint) {
  Backward b = backward_of({3}, [](const Tensor& x) { return all_reduce(x, kDp); });
  expect_group(b.producer(), "all_reduce");
  EXPECT_EQ(b.producer().attrs.s("op"), "sum");
  b = backward_of({3}, [](const Tensor& x) { return all_reduce(x, kDp, ReduceOp::avg); });
  expect_group(b.producer(), "all_reduce");
  EXPECT_EQ(b.producer().attrs.s("op"), "avg");
}

TEST(Collectives, AllToAllAdjointSwapsItsDims) {
  Backward b = backward_of({8, 3}, [](const Tensor& x) { return all_to_all(x, 0, 1, kDp); });
  expect_group(b.producer(), "all_to_all");
  EXPECT_EQ(b.producer().attrs.i("split_dim"), 1);
  EXPECT_EQ(b.producer().attrs.i("concat_dim"), 0);
}

TEST(Collectives, BroadcastAndReduceAreEachOthersAdjoint) {
  Backward b = backward_of({3}, [](const Tensor& x) { return broadcast(x, 2, kDp); });
  expect_group(b.producer(), "reduce");
  EXPECT_EQ(b.producer().attrs.i("root"), 2);
  b = backward_of({3}, [](const Tensor& x) { return reduce(x, 1, kDp); });
  expect_group(b.producer(), "broadcast");
  EXPECT_EQ(b.producer().attrs.i("root"), 1);
}

TEST(Collectives, MaxHasNoGradient) {
  expect_error(
      [] { backward_of({3}, [](const Tensor& x) { return all_reduce(x, kDp, ReduceOp::max); }); },
      "has no gradient");
  expect_error(
      [] {
        backward_of({8}, [](const Tensor& x) { return reduce_scatter(x, 0, kDp, ReduceOp::max); });
      },
      "has no gradient");
}

TEST(Collectives, BackwardOfATwoLevelShardedProduct) {
  // SimpleFSDP's pattern: gather a sharded weight, use it, reduce-scatter
  // its gradient: the backward holds exactly one reduce_scatter.
  auto rec = Recording::create();
  Tensor shard = rec->tensor(rec->capture(zeros({1, 3})), kCPU);
  Tensor x = rec->tensor(rec->capture(zeros({4, 3})), kCPU);
  ContextGuard trace(std::make_shared<TraceContext>(rec));
  Tensor loss = sum(all_gather(shard, 0, kDp) * x);
  size_t forward_nodes = rec->graph.nodes().size();
  append_backward(*rec, loss, {shard, x});
  int gathers = 0, scatters = 0;
  const auto& nodes = rec->graph.nodes();
  for (size_t i = forward_nodes; i < nodes.size(); ++i) {
    gathers += nodes[i].op->name == "all_gather";
    scatters += nodes[i].op->name == "reduce_scatter";
  }
  EXPECT_EQ(gathers, 0);
  EXPECT_EQ(scatters, 1);
}

}  // namespace
}  // namespace kiln
