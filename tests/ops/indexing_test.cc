#include "kiln/ops/indexing.h"

#include <gtest/gtest.h>

#include <random>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/threads.h"
#include "tests/support/coords.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::check_gradients;
using test::error_of;
using test::random_tensor;
using test::ravel;
using test::unravel;

// Random indices in [0, n) of `shape`, with repeats.
Tensor random_index(const Shape& shape, int64_t n, uint64_t seed, DType dtype = DType::i64) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(size_t(shape.numel()));
  for (int64_t& i : v) i = int64_t(rng() % uint64_t(n));
  return from_vector(v, shape).to(dtype);
}

// ---- Naive references ----

std::vector<double> ref_gather(const Tensor& x, int axis, const Tensor& index) {
  std::vector<double> xs = x.to_vector<double>();
  std::vector<int64_t> is = index.to_vector<int64_t>();
  std::vector<double> out;
  for (int64_t p = 0; p < index.numel(); ++p) {
    std::vector<int64_t> c = unravel(p, index.shape());
    c[size_t(axis)] = is[size_t(p)];
    out.push_back(xs[size_t(ravel(c, x.shape()))]);
  }
  return out;
}

// Adds in index order, like the kernel, so f32 results are bit-identical.
template <class T>
std::vector<T> ref_scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  std::vector<T> out = x.to_vector<T>(), ss = src.to_vector<T>();
  std::vector<int64_t> is = index.to_vector<int64_t>();
  for (int64_t p = 0; p < index.numel(); ++p) {
    std::vector<int64_t> c = unravel(p, index.shape());
    T v = ss[size_t(ravel(c, src.shape()))];
    c[size_t(axis)] = is[size_t(p)];
    out[size_t(ravel(c, x.shape()))] += v;
  }
  return out;
}

std::vector<double> ref_index_select(const Tensor& x, int axis, const Tensor& index) {
  std::vector<double> xs = x.to_vector<double>();
  std::vector<int64_t> is = index.to_vector<int64_t>();
  Shape out = x.shape();
  out[axis] = index.numel();
  std::vector<double> r;
  for (int64_t p = 0; p < out.numel(); ++p) {
    std::vector<int64_t> c = unravel(p, out);
    c[size_t(axis)] = is[size_t(c[size_t(axis)])];
    r.push_back(xs[size_t(ravel(c, x.shape()))]);
  }
  return r;
}

template <class T>
std::vector<T> ref_index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
  std::vector<T> out = x.to_vector<T>(), ss = src.to_vector<T>();
  std::vector<int64_t> is = index.to_vector<int64_t>();
  for (int64_t p = 0; p < src.numel(); ++p) {
    std::vector<int64_t> c = unravel(p, src.shape());
    c[size_t(axis)] = is[size_t(c[size_t(axis)])];
    out[size_t(ravel(c, x.shape()))] += ss[size_t(p)];
  }
  return out;
}

// ---- gather / scatter_add ----

struct GatherCase {
  Shape x, index;
  int axis;
};
const std::vector<GatherCase> kGatherCases = {
    {{5}, {7}, 0},
    {{3, 4}, {3, 2}, 1},
    {{3, 4}, {6, 4}, 0},
    {{4, 5, 3}, {2, 3, 1}, 1},  // index smaller than x outside the axis
    {{2, 1, 3}, {2, 1, 3}, 2},
    {{2, 3}, {0, 3}, 0},
};

TEST(Gather, MatchesNaiveReference) {
  uint64_t seed = 1;
  for (const GatherCase& c : kGatherCases) {
    for (DType it : {DType::i32, DType::i64}) {
      Tensor x = random_tensor(c.x, DType::f32, seed++);
      Tensor index = random_index(c.index, c.x[c.axis], seed++, it);
      Tensor out = gather(x, c.axis, index);
      ASSERT_EQ(out.shape(), c.index);
      EXPECT_EQ(out.to_vector<double>(), ref_gather(x, c.axis, index)) << c.x << " axis " << c.axis;
      EXPECT_EQ(gather(x, c.axis - c.x.size(), index).to_vector<double>(), out.to_vector<double>());
    }
  }
  Tensor ints = from_vector<int64_t>({10, 11, 12, 13}, {2, 2});
  EXPECT_EQ(gather(ints, 1, from_vector<int32_t>({1, 1, 0, 1}, {2, 2})).to_vector<int64_t>(),
            (std::vector<int64_t>{11, 11, 12, 13}));
}

TEST(ScatterAdd, MatchesNaiveReferenceWithRepeats) {
  uint64_t seed = 100;
  for (const GatherCase& c : kGatherCases) {
    Tensor x = random_tensor(c.x, DType::f32, seed++);
    Tensor index = random_index(c.index, c.x[c.axis], seed++);
    Tensor src = random_tensor(c.index, DType::f32, seed++);
    EXPECT_EQ(scatter_add(x, c.axis, index, src).to_vector<float>(),
              ref_scatter_add<float>(x, c.axis, index, src))
        << c.x << " axis " << c.axis;
  }
  // src may be larger than index: only index's extent is read.
  Tensor x = zeros({3, 2});
  Tensor src = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor index = from_vector<int64_t>({2, 2, 0}, {1, 3}).slice(1, 0, 2);  // [[2, 2]]
  EXPECT_EQ(scatter_add(x, 0, index, src).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 1, 2}));
}

TEST(ScatterAdd, SameBitsForEveryThreadCount) {
  Tensor x = random_tensor({64, 300}, DType::f32, 7);
  Tensor index = random_index({2000, 300}, 64, 8);
  Tensor src = random_tensor({2000, 300}, DType::f32, 9);
  std::vector<float> expect = ref_scatter_add<float>(x, 0, index, src);
  int saved = num_threads();
  for (int threads : {1, 3, 8}) {
    set_num_threads(threads);
    EXPECT_EQ(scatter_add(x, 0, index, src).to_vector<float>(), expect) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST(GatherScatter, Gradients) {
  uint64_t seed = 200;
  for (const GatherCase& c : kGatherCases) {
    Tensor index = random_index(c.index, c.x[c.axis], seed++);
    int axis = c.axis;
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) { return gather(a[0], axis, index); },
        {random_tensor(c.x, DType::f64, seed++)}))
        << "gather " << c.x << " axis " << axis;
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) { return scatter_add(a[0], axis, index, a[1]); },
        {random_tensor(c.x, DType::f64, seed++), random_tensor(c.index, DType::f64, seed++)}))
        << "scatter_add " << c.x << " axis " << axis;
  }
  // src larger than index: the unread part of src has zero gradient.
  Tensor index = from_vector<int64_t>({1, 0, 1, 1}, {2, 2});
  EXPECT_TRUE(check_gradients(
      [&](const std::vector<Tensor>& a) { return scatter_add(a[0], 1, index, a[1]); },
      {random_tensor({2, 3}, DType::f64, 1), random_tensor({3, 4}, DType::f64, 2)}));
  // The index broadcast into a product: gradients through both operands.
  EXPECT_TRUE(check_gradients(
      [&](const std::vector<Tensor>& a) { return gather(a[0], 0, index) * a[1]; },
      {random_tensor({2, 2}, DType::f64, 3), random_tensor({1, 2}, DType::f64, 4)}));
}

// ---- index_select / index_add / embedding ----

TEST(IndexSelect, MatchesNaiveReference) {
  struct Case {
    Shape x;
    int axis;
    int64_t n;
  };
  uint64_t seed = 300;
  for (const Case& c : std::vector<Case>{{{5}, 0, 8}, {{4, 3}, 0, 2}, {{4, 3}, 1, 5},
                                         {{2, 3, 4}, 1, 3}, {{2, 1, 4}, 2, 0}}) {
    for (DType it : {DType::i32, DType::i64}) {
      Tensor x = random_tensor(c.x, DType::f32, seed++);
      Tensor index = random_index({c.n}, c.x[c.axis], seed++, it);
      Tensor out = index_select(x, c.axis, index);
      Shape expect = c.x;
      expect[c.axis] = c.n;
      ASSERT_EQ(out.shape(), expect);
      EXPECT_EQ(out.to_vector<double>(), ref_index_select(x, c.axis, index)) << c.x;
    }
  }
  // A strided (transposed) input.
  Tensor t = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).t();  // [[0,3],[1,4],[2,5]]
  EXPECT_EQ(index_select(t, 0, from_vector<int64_t>({2, 0}, {2})).to_vector<float>(),
            (std::vector<float>{2, 5, 0, 3}));
}

TEST(IndexAdd, MatchesNaiveReferenceOnEveryThreadCount) {
  Tensor x = random_tensor({3, 50, 200}, DType::f32, 400);
  Tensor index = random_index({500}, 50, 401);
  Tensor src = random_tensor({3, 500, 200}, DType::f32, 402);
  std::vector<float> expect = ref_index_add<float>(x, 1, index, src);
  int saved = num_threads();
  for (int threads : {1, 2, 8}) {
    set_num_threads(threads);
    EXPECT_EQ(index_add(x, 1, index, src).to_vector<float>(), expect) << threads << " threads";
  }
  set_num_threads(saved);
  Tensor xi = from_vector<int32_t>({1, 2, 3}, {3});
  EXPECT_EQ(index_add(xi, 0, from_vector<int64_t>({2, 2, 0}, {3}),
                      from_vector<int32_t>({10, 20, 30}, {3}))
                .to_vector<int32_t>(),
            (std::vector<int32_t>{31, 2, 33}));
}

TEST(Embedding, PicksRows) {
  Tensor w = random_tensor({6, 4}, DType::f32, 500);
  Tensor ids = from_vector<int32_t>({5, 0, 5, 2, 1, 3}, {2, 3});
  Tensor out = embedding(w, ids);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 4}));
  std::vector<double> ws = w.to_vector<double>(), expect;
  for (int32_t id : ids.to_vector<int32_t>())
    for (int64_t d = 0; d < 4; ++d) expect.push_back(ws[size_t(id * 4 + d)]);
  EXPECT_EQ(out.to_vector<double>(), expect);
  EXPECT_EQ(embedding(w, from_vector<int64_t>({3}, {})).shape(), (Shape{4}));
}

TEST(IndexSelectEmbedding, Gradients) {
  Tensor index = from_vector<int64_t>({2, 0, 2, 2}, {4});
  for (int axis : {0, 1, 2}) {
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) { return index_select(a[0], axis, index); },
        {random_tensor({3, 3, 3}, DType::f64, 600 + axis)}))
        << "index_select axis " << axis;
  }
  EXPECT_TRUE(check_gradients(
      [&](const std::vector<Tensor>& a) {
        return index_add(a[0], 1, index, a[1]);
      },
      {random_tensor({2, 3, 1}, DType::f64, 610), random_tensor({2, 4, 1}, DType::f64, 611)}));
  Tensor ids = from_vector<int64_t>({1, 4, 1, 0, 1, 4}, {3, 2});
  EXPECT_TRUE(check_gradients(
      [&](const std::vector<Tensor>& a) { return embedding(a[0], ids); },
      {random_tensor({5, 3}, DType::f64, 620)}));
  // Broadcast against a [D] scale: both gradients.
  EXPECT_TRUE(check_gradients(
      [&](const std::vector<Tensor>& a) { return embedding(a[0], ids) * a[1]; },
      {random_tensor({5, 3}, DType::f64, 621), random_tensor({3}, DType::f64, 622)}));
}

TEST(OneHot, MatchesDefinition) {
  Tensor ids = from_vector<int64_t>({2, 0, 1, 2}, {2, 2});
  Tensor out = one_hot(ids, 3);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(out.dtype(), DType::f32);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(one_hot(from_vector<int32_t>({1}, {1}), 2, DType::b8).to_vector<int>(),
            (std::vector<int>{0, 1}));
  EXPECT_THROW(one_hot(ids, 0), Error);
  EXPECT_THROW(one_hot(zeros({2}), 3), Error);
}

// ---- errors ----

TEST(IndexErrors, OutOfRangeSurfacesAtSyncNamingTheOp) {
  EagerModeGuard mode(EagerMode::strict);
  Tensor x = zeros({3, 4});
  Tensor bad = from_vector<int64_t>({0, 7}, {2});
  Tensor y = index_select(x, 0, bad);  // only queued
  std::string msg = error_of([] { synchronize(); });
  EXPECT_NE(msg.find("op 'index_select'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 7 is out of range for axis 0 of size 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0..2"), std::string::npos) << msg;

  struct Case {
    std::string op;
    std::function<Tensor()> run;
    std::string needle;
  };
  Tensor neg = from_vector<int32_t>({-1, 0}, {1, 2});
  Tensor four = from_vector<int64_t>({4}, {1, 1});
  std::vector<Case> cases = {
      {"gather", [&] { return gather(x, 0, neg); }, "index -1 is out of range"},
      {"scatter_add", [&] { return scatter_add(x, 1, four, ones({1, 1})); },
       "index 4 is out of range for axis 1 of size 4"},
      {"index_add", [&] { return index_add(x, 0, bad, zeros({2, 4})); }, "index 7"},
      {"embedding", [&] { return embedding(x, from_vector<int64_t>({3}, {1})); },
       "index 3 is out of range for a weight of 3 rows"},
      {"one_hot", [&] { return one_hot(from_vector<int64_t>({5}, {1}), 5); },
       "out of range for num_classes 5"},
  };
  for (const Case& c : cases) {
    c.run();
    std::string m = error_of([] { synchronize(); });
    EXPECT_NE(m.find("op '" + c.op + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(c.needle), std::string::npos) << m;
  }
}

TEST(IndexErrors, DebugModeRaisesAtTheCall) {
  EagerModeGuard mode(EagerMode::debug);
  std::string msg = error_of([] { gather(zeros({2}), 0, from_vector<int64_t>({2}, {1})); });
  EXPECT_NE(msg.find("op 'gather'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 2 is out of range"), std::string::npos) << msg;
}

TEST(IndexErrors, BadShapesAndDtypesAreImmediate) {
  Tensor x = zeros({3, 4});
  Tensor i2 = zeros({2, 2}, DType::i64);
  EXPECT_THROW(gather(x, 0, zeros({2}, DType::i64)), Error);       // rank
  EXPECT_THROW(gather(x, 0, zeros({2, 5}, DType::i64)), Error);    // larger outside the axis
  EXPECT_THROW(gather(x, 2, i2), Error);                           // axis
  EXPECT_THROW(scatter_add(x, 0, i2, zeros({1, 2})), Error);       // src smaller than index
  EXPECT_THROW(scatter_add(x, 0, i2, zeros({2, 2}, DType::f64)), Error);
  EXPECT_THROW(index_select(x, 0, i2), Error);                     // 2-D index
  EXPECT_THROW(index_add(x, 0, zeros({2}, DType::i64), zeros({3, 4})), Error);
  EXPECT_THROW(embedding(zeros({4}), zeros({2}, DType::i64)), Error);
  std::string msg = error_of([&] { gather(x, 0, zeros({3, 4})); });
  EXPECT_NE(msg.find("gather"), std::string::npos) << msg;
  EXPECT_NE(msg.find("i32 or i64"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
