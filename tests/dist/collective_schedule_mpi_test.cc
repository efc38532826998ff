// Collectives split into start/wait and scheduled for overlap
// (kiln/compiler/collective_schedule.h) compute exactly what the blocking
// collectives compute: a compiled program gives bit-identical results with
// the pass on and off, and the same as eager execution (ctest runs this on
// 2 and 4 ranks).
#include <gtest/gtest.h>

#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/runtime/compile.h"

namespace kiln::dist {
namespace {

using namespace std::chrono_literals;

int ranks() { return world()->size(); }
int me() { return world()->rank(); }

// Rank r's tensor: multiples of 1/8, distinct per rank.
Tensor input(int r, const Shape& shape) {
  std::vector<float> v;
  for (int64_t i = 0; i < shape.numel(); ++i)
    v.push_back(float((r * 17 + i * 5) % 16) / 8.0f - 1.0f);
  return from_vector<float>(v, shape);
}

// Every collective, along inner dimensions too (the packed paths unpack in
// the wait), interleaved with compute; several results are returned as they
// are (a wait writing into an output buffer of its own).
std::vector<Tensor> program(const std::vector<Tensor>& a) {
  MeshAxis shard{"dp_shard", ranks()};
  int64_t n = ranks();
  Tensor x = a[0], y = a[1];
  std::vector<Tensor> out;
  Tensor acc = tanh(y);
  for (int layer = 0; layer < 3; ++layer) {
    Tensor w = all_gather(x * double(layer + 1), 1, shard);           // [4, 6n], packed
    Tensor wc = all_gather(x + double(layer), 0, shard, DType::bf16);  // [4n, 6], cast
    acc = tanh(matmul(acc.slice(1, 0, 4), w.slice(1, 0, 8)) +
               sum(wc.to(DType::f32).slice(0, 0, 8), {1}, true));
    out.push_back(reduce_scatter(acc * acc, 1, shard));  // [8, 8/n], packed
  }
  out.push_back(all_to_all(y, 1, 0, shard));                      // [8n, 8/n]
  out.push_back(all_to_all(y, 0, 1, shard));                      // [8/n, 8n]
  Tensor r = all_reduce(acc, shard, ReduceOp::avg);
  out.push_back(exp(r));
  out.push_back(broadcast(r * 3.0, n - 1, shard));
  out.push_back(reduce(r + acc, 0, shard));
  out.push_back(reduce_scatter(all_gather(x, 0, shard), 0, shard, ReduceOp::max));
  return out;
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> v;
  for (const Tensor& t : ts) v.push_back(t.to_vector<float>());
  return v;
}

int count(const ir::Graph& g, const std::string& op) {
  int c = 0;
  for (const ir::Node& node : g.nodes()) c += node.op->name == op;
  return c;
}

TEST(CollectiveSchedule, ScheduledProgramsMatchBlockingOnesBitForBit) {
  world()->set_timeout(30s);
  set_current_mesh(std::make_shared<DeviceMesh>(world(), MeshDegrees{}));
  std::vector<Tensor> args{input(me(), {4, 6}), input(me() + 7, {8, 8})};

  CompileOptions on, off;
  on.name = "overlapped";
  off.name = "blocking";
  on.spmd_safe = off.spmd_safe = true;  // one program each, collectives inside
  off.passes.overlap_collectives = false;
  CompiledFunction overlapped = compile(program, on), blocking = compile(program, off);
  auto want = values(blocking(args));
  auto got = values(overlapped(args));
  EXPECT_EQ(got, want);
  EXPECT_EQ(values(overlapped(args)), want) << "second run";
  EXPECT_EQ(values(program(args)), want) << "eager";

  const ir::Graph& g = overlapped.last_executable().graph();
  EXPECT_EQ(count(g, "collective_wait"), 16);
  EXPECT_EQ(count(g, "all_gather_start"), 4);
  EXPECT_EQ(count(blocking.last_executable().graph(), "collective_wait"), 0);
}

// A program failing between a collective's start and its wait finishes the
// transfer before its buffers go (kernel.h drain_in_flight): the error is
// the failing op's, and the next program's collectives run normally.
TEST(CollectiveSchedule, AProgramFailingMidTransferLeavesNothingInFlight) {
  world()->set_timeout(30s);
  set_current_mesh(std::make_shared<DeviceMesh>(world(), MeshDegrees{}));
  MeshAxis shard{"dp_shard", ranks()};
  CompileOptions o;
  o.name = "failing";
  o.spmd_safe = true;
  CompiledFunction failing = compile(
      [&](const std::vector<Tensor>& a) {
        Tensor gathered = all_gather(a[0], 0, shard);       // started first
        Tensor picked = index_select(a[1], 0, a[2]);        // fails: index out of range
        return std::vector<Tensor>{gathered * sum(picked)};  // waited for here
      },
      o);
  Tensor x = input(me(), {4, 6}), table = input(me(), {3, 2});
  Tensor bad = from_vector<int64_t>({0, 7}, {2});
  try {
    failing({x, table, bad})[0].to_vector<float>();
    ADD_FAILURE() << "an out-of-range index must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index_select"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count(failing.last_executable().graph(), "all_gather_start"), 1);
  Tensor good = from_vector<int64_t>({0, 2}, {2});
  std::vector<float> got = failing({x, table, good})[0].to_vector<float>();
  std::vector<float> want = (all_gather(x, 0, shard) * sum(index_select(table, 0, good))).to_vector<float>();
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace kiln::dist
