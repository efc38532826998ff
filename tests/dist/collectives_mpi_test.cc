// Every process-group operation on the MPI world (ctest runs this on 2 and
// 4 ranks), against the same computation done in one process: each rank
// can generate every rank's input, and a plain loop over ranks gives the
// expected bits. f32 and bf16 (plus f64 and the integers for all_reduce),
// even and uneven sizes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/dist/world.h"
#include "tests/support/support.h"

namespace kiln::dist {
namespace {

using test::expect_error;

using namespace std::chrono_literals;

ProcessGroup& the_world() {
  static std::shared_ptr<ProcessGroup> w = [] {
    auto g = world();
    g->set_timeout(30s);  // a failed assertion on one rank must not hang the others for long
    return g;
  }();
  return *w;
}

// A value in [-8, 8) with a full mantissa, the same on every rank.
double value(int rank, int64_t i, int salt) {
  uint64_t z = uint64_t(rank) * 0x9E3779B97F4A7C15ull + uint64_t(i) * 0xBF58476D1CE4E5B9ull +
               uint64_t(salt) * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) / double(1ull << 53) * 16.0 - 8.0;
}

template <class T>
T make(double v) {
  if constexpr (std::is_integral_v<T>) return T(std::llround(v * 1000));
  else if constexpr (std::is_same_v<T, bf16>) return bf16(float(v));
  else return T(v);
}

// Rank r's buffer of n elements.
template <class T>
std::vector<T> input(int rank, int64_t n, int salt) {
  std::vector<T> x;
  for (int64_t i = 0; i < n; ++i) x.push_back(make<T>(value(rank, i, salt)));
  return x;
}

template <class T>
std::vector<uint8_t> bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One process's loop: element i of every rank's buffer, combined left to
// right over ranks in f32 (bf16), f64 or wrapping integers.
template <class T>
std::vector<T> reduced(ReduceOp op, int ranks, const std::function<std::vector<T>(int)>& buffer) {
  using A = std::conditional_t<std::is_same_v<T, bf16>, float, T>;
  std::vector<std::vector<T>> x;
  for (int r = 0; r < ranks; ++r) x.push_back(buffer(r));
  std::vector<T> out;
  for (size_t i = 0; i < x[0].size(); ++i) {
    A acc = A(x[0][i]);
    for (int r = 1; r < ranks; ++r) {
      A v = A(x[size_t(r)][i]);
      if (op == ReduceOp::max) acc = v > acc ? v : acc;
      else if constexpr (std::is_integral_v<A>)
        acc = A(std::make_unsigned_t<A>(acc) + std::make_unsigned_t<A>(v));
      else acc = acc + v;
    }
    if constexpr (!std::is_integral_v<A>)
      if (op == ReduceOp::avg) acc = acc / A(ranks);
    out.push_back(T(acc));
  }
  return out;
}

template <class T>
void check_all_reduce(ReduceOp op, int64_t count, bool in_place) {
  ProcessGroup& w = the_world();
  DType dt = dtype_of<T>::value;
  std::vector<T> x = input<T>(w.rank(), count, 1);
  std::vector<T> y(static_cast<size_t>(count));
  T* out = in_place ? x.data() : y.data();
  w.all_reduce(x.data(), out, count, dt, op).wait();
  std::vector<T> got(out, out + count);
  std::vector<T> want = reduced<T>(op, w.size(), [&](int r) { return input<T>(r, count, 1); });
  EXPECT_EQ(bytes(got), bytes(want)) << dtype_name(dt) << " " << reduce_op_name(op) << " count "
                                     << count << (in_place ? " in place" : "");
}

TEST(Collectives, AllReduceIsTheRankOrderedLoop) {
  for (int64_t count : {1, 7, 1000, 4099})
    for (bool in_place : {false, true}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
        check_all_reduce<float>(op, count, in_place);
        check_all_reduce<bf16>(op, count, in_place);
        check_all_reduce<double>(op, count, in_place);
      }
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        check_all_reduce<int32_t>(op, count, in_place);
        check_all_reduce<int64_t>(op, count, in_place);
      }
    }
}

TEST(Collectives, AllReduceOfOneMillionFloats) {
  check_all_reduce<float>(ReduceOp::sum, 1 << 20, false);
}

// Uneven per-rank counts, zeros included.
std::vector<int64_t> uneven(int ranks, int salt) {
  std::vector<int64_t> c;
  for (int r = 0; r < ranks; ++r) c.push_back((r * 3 + salt) % 5);
  return c;
}

template <class T>
void check_all_gather(const std::vector<int64_t>& counts) {
  ProcessGroup& w = the_world();
  std::vector<T> x = input<T>(w.rank(), counts[size_t(w.rank())], 2);
  std::vector<T> out(size_t(std::accumulate(counts.begin(), counts.end(), int64_t(0))));
  w.all_gather(x.data(), out.data(), counts, dtype_of<T>::value).wait();
  std::vector<T> want;
  for (int r = 0; r < w.size(); ++r)
    for (T v : input<T>(r, counts[size_t(r)], 2)) want.push_back(v);
  EXPECT_EQ(bytes(out), bytes(want)) << dtype_name(dtype_of<T>::value);
}

TEST(Collectives, AllGatherEvenAndUneven) {
  int n = the_world().size();
  for (const auto& counts : {std::vector<int64_t>(size_t(n), 6), uneven(n, 1), uneven(n, 4)}) {
    check_all_gather<float>(counts);
    check_all_gather<bf16>(counts);
  }
}

template <class T>
void check_reduce_scatter(const std::vector<int64_t>& counts, ReduceOp op) {
  ProcessGroup& w = the_world();
  int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  int64_t offset = std::accumulate(counts.begin(), counts.begin() + w.rank(), int64_t(0));
  std::vector<T> x = input<T>(w.rank(), total, 3);
  std::vector<T> out(static_cast<size_t>(counts[size_t(w.rank())]));
  w.reduce_scatter(x.data(), out.data(), counts, dtype_of<T>::value, op).wait();
  std::vector<T> all = reduced<T>(op, w.size(), [&](int r) { return input<T>(r, total, 3); });
  std::vector<T> want(all.begin() + offset, all.begin() + offset + int64_t(out.size()));
  EXPECT_EQ(bytes(out), bytes(want)) << dtype_name(dtype_of<T>::value) << " "
                                     << reduce_op_name(op);
}

TEST(Collectives, ReduceScatterEvenAndUneven) {
  int n = the_world().size();
  for (const auto& counts : {std::vector<int64_t>(size_t(n), 9), uneven(n, 2)})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      check_reduce_scatter<float>(counts, op);
      check_reduce_scatter<bf16>(counts, op);
    }
}

template <class T>
void check_all_to_all() {
  ProcessGroup& w = the_world();
  int n = w.size(), me = w.rank();
  // Rank s sends (s + 2d) % 4 elements to rank d; element k of that message
  // is value(s, d * 100 + k).
  auto sent = [](int s, int d) { return int64_t((s + 2 * d) % 4); };
  std::vector<int64_t> send_counts, recv_counts;
  std::vector<T> x, want;
  for (int d = 0; d < n; ++d) {
    send_counts.push_back(sent(me, d));
    for (int64_t k = 0; k < sent(me, d); ++k) x.push_back(make<T>(value(me, d * 100 + k, 4)));
  }
  for (int s = 0; s < n; ++s) {
    recv_counts.push_back(sent(s, me));
    for (int64_t k = 0; k < sent(s, me); ++k) want.push_back(make<T>(value(s, me * 100 + k, 4)));
  }
  std::vector<T> out(want.size());
  w.all_to_all(x.data(), send_counts, out.data(), recv_counts, dtype_of<T>::value).wait();
  EXPECT_EQ(bytes(out), bytes(want)) << dtype_name(dtype_of<T>::value);
}

TEST(Collectives, AllToAllWithUnevenSplits) {
  check_all_to_all<float>();
  check_all_to_all<bf16>();
}

TEST(Collectives, BroadcastAndReduceToARoot) {
  ProcessGroup& w = the_world();
  int root = w.size() - 1;
  std::vector<bf16> b = input<bf16>(w.rank(), 1001, 5);
  w.broadcast(b.data(), 1001, DType::bf16, root).wait();
  EXPECT_EQ(bytes(b), bytes(input<bf16>(root, 1001, 5)));

  for (int64_t count : {3, 1001}) {
    std::vector<float> x = input<float>(w.rank(), count, 6), out(size_t(count), -1.0f);
    w.reduce(x.data(), out.data(), count, DType::f32, 1).wait();
    std::vector<float> want =
        w.rank() == 1 ? reduced<float>(ReduceOp::sum, w.size(),
                                       [&](int r) { return input<float>(r, count, 6); })
                      : std::vector<float>(size_t(count), -1.0f);  // not written
    EXPECT_EQ(out, want) << "count " << count;
  }
}

TEST(Collectives, SendRecvAroundARingAndBarrier) {
  ProcessGroup& w = the_world();
  int n = w.size(), me = w.rank();
  std::vector<float> mine = input<float>(me, 50, 7), got(50);
  Work r = w.recv(got.data(), 50, DType::f32, (me + n - 1) % n, 3);
  Work s = w.send(mine.data(), 50, DType::f32, (me + 1) % n, 3);
  s.wait();
  r.wait();
  EXPECT_EQ(got, input<float>((me + n - 1) % n, 50, 7));
  w.barrier().wait();
}

TEST(Collectives, SubGroupsFromSplit) {
  ProcessGroup& w = the_world();
  // Even and odd ranks, each ranked in reverse.
  auto g = w.split(w.rank() % 2, -w.rank(), "parity");
  std::vector<int> members;
  for (int r = w.size() - 1; r >= 0; --r) {
    if (r % 2 == w.rank() % 2) members.push_back(r);
  }
  EXPECT_EQ(g->world_ranks(), members);
  EXPECT_EQ(g->world_ranks()[size_t(g->rank())], w.rank());
  EXPECT_EQ(g->name(), "parity");
  std::vector<float> x = input<float>(w.rank(), 33, 8), out(33);
  g->all_reduce(x.data(), out.data(), 33, DType::f32).wait();
  std::vector<float> want = reduced<float>(ReduceOp::sum, g->size(), [&](int r) {
    return input<float>(members[size_t(r)], 33, 8);
  });
  EXPECT_EQ(out, want);
}

TEST(Collectives, CallsReturnAtOnceAndOverlapWithCompute) {
  ProcessGroup& w = the_world();
  if (w.rank() == 0) std::this_thread::sleep_for(300ms);  // a late rank
  std::vector<float> x(64, 1.0f), y(64), z(64 * size_t(w.size())), b(8, float(w.rank()));
  Work reduce = w.all_reduce(x.data(), y.data(), 64, DType::f32);
  Work gather = w.all_gather(x.data(), z.data(), 64, DType::f32);
  Work bcast = w.broadcast(b.data(), 8, DType::f32, 0);
  // Rank 0 has not called yet: nothing can have completed on the others.
  if (w.rank() != 0) {
    EXPECT_FALSE(reduce.done());
  }
  double busy = 0;  // compute while the data moves
  for (int i = 0; i < 1000000; ++i) busy += std::sqrt(double(i));
  EXPECT_GT(busy, 0);
  bcast.wait();
  gather.wait();
  reduce.wait();
  EXPECT_EQ(y, std::vector<float>(64, float(w.size())));
  EXPECT_EQ(z, std::vector<float>(z.size(), 1.0f));
  EXPECT_EQ(b, std::vector<float>(8, 0.0f));
}

TEST(Collectives, ArgumentErrorsAreRaisedAtTheCall) {
  ProcessGroup& w = the_world();
  std::vector<float> x(8), y(64);
  std::vector<int64_t> short_counts(size_t(w.size()) - 1, 1);
  expect_error([&] { w.all_gather(x.data(), y.data(), short_counts, DType::f32); },
               cat("got ", w.size() - 1, " counts for ", w.size(), " ranks"));
  expect_error([&] { w.broadcast(x.data(), 8, DType::f32, w.size()); },
               cat("root ", w.size(), " is not a rank"));
  expect_error([&] { w.all_reduce(x.data(), y.data(), 2, DType::i32, ReduceOp::avg); },
               "avg needs a floating dtype");
  expect_error([&] { w.all_reduce(x.data(), y.data(), 2, DType::b8); }, "cannot reduce bool");
  expect_error([&] { w.send(x.data(), 1, DType::f32, w.rank()); }, "cannot send to itself");
  expect_error([&] { w.all_reduce(x.data(), y.data(), -1, DType::f32); }, "count -1");
  expect_error([&] { w.all_reduce(nullptr, y.data(), 4, DType::f32); }, "in is null");
  expect_error([&] { w.set_timeout(0ms); }, "timeout must be positive");
  expect_error([&] { w.split(-1, 0, "bad"); }, "color -1 must be >= 0");
}

}  // namespace
}  // namespace kiln::dist
