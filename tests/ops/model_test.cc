// The transformer ops (rms_norm, rope, cross_entropy, attention) against
// naive loop references written here, and their gradients against finite
// differences.
#include "kiln/ops/attention.h"
#include "kiln/ops/cross_entropy.h"
#include "kiln/ops/rms_norm.h"
#include "kiln/ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/base/error.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::all_close;
using test::check_gradients;
using test::random_tensor;

std::vector<double> host(const Tensor& t) { return t.to_vector<double>(); }

// ---------------------------------------------------------------- rms_norm

std::vector<double> rms_norm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                 double eps) {
  size_t d = w.size();
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double ss = 0;
    for (size_t j = 0; j < d; ++j) ss += x[r * d + j] * x[r * d + j];
    double inv = 1 / std::sqrt(ss / double(d) + eps);
    for (size_t j = 0; j < d; ++j) y[r * d + j] = x[r * d + j] * inv * w[j];
  }
  return y;
}

TEST(RmsNorm, MatchesLoopReference) {
  const std::pair<DType, double> dtypes[] = {
      {DType::f64, 1e-12}, {DType::f32, 2e-6}, {DType::bf16, 1e-2}};
  for (auto [dt, tol] : dtypes) {
    Tensor x = random_tensor({2, 3, 5}, dt, 1, -2, 2);
    Tensor w = random_tensor({5}, dt, 2, 0.5, 1.5);
    Tensor y = rms_norm(x, w, 1e-2);
    EXPECT_EQ(y.type(), x.type());
    EXPECT_TRUE(all_close(host(y), rms_norm_ref(host(x), host(w), 1e-2), tol, tol))
        << dtype_name(dt);
  }
}

TEST(RmsNorm, RejectsBadWeightAndDtype) {
  Tensor x = zeros({2, 4});
  EXPECT_THROW(rms_norm(x, ones({3}), 1e-6), Error);
  EXPECT_THROW(rms_norm(x, ones({4}, DType::f64), 1e-6), Error);
  EXPECT_THROW(rms_norm(zeros({2, 4}, DType::i32), ones({4}, DType::i32), 1e-6), Error);
  EXPECT_THROW(rms_norm(x, ones({4}), -1), Error);
}

TEST(RmsNorm, Gradients) {
  for (Shape s : {Shape{4}, Shape{2, 3}, Shape{2, 1, 5}, Shape{3, 1}}) {
    Tensor x = random_tensor(s, DType::f64, 3, -2, 2);
    Tensor w = random_tensor({s[s.size() - 1]}, DType::f64, 4, 0.5, 1.5);
    EXPECT_TRUE(check_gradients([](const auto& a) { return rms_norm(a[0], a[1], 1e-3); }, {x, w}))
        << s;
  }
}

// -------------------------------------------------------------------- rope

// Meta's original Llama 3.1 apply_scaling, written as its loop.
std::vector<double> llama31_reference(int64_t head_dim, double theta) {
  const double factor = 8, low = 1, high = 4, old_len = 8192;
  std::vector<double> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    double freq = 1 / std::pow(theta, double(i) / double(head_dim));
    double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < old_len / high) {
      out.push_back(freq);
    } else if (wavelen > old_len / low) {
      out.push_back(freq / factor);
    } else {
      double smooth = (old_len / wavelen - low) / (high - low);
      out.push_back((1 - smooth) * freq / factor + smooth * freq);
    }
  }
  return out;
}

TEST(Rope, InverseFrequencies) {
  std::vector<double> inv = rope_inv_freq(8, 10000);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_TRUE(all_close(inv, {1, 0.1, 0.01, 0.001}, 1e-14, 0));

  std::vector<double> scaled = rope_inv_freq(128, 500000, Llama31Scaling{});
  EXPECT_TRUE(all_close(scaled, llama31_reference(128, 500000), 1e-14, 0));
  // Values of HF's _compute_llama3_parameters (computed in f64 with torch):
  // index 28 is high-frequency (kept), 29..34 the smoothed band, 35 and 63
  // low-frequency (divided by 8).
  const std::pair<int, double> hf[] = {{0, 1.0},
                                       {28, 0.0032114459947525913},
                                       {29, 0.002166570763503359},
                                       {32, 0.0005248461609929547},
                                       {34, 0.00017850781276799638},
                                       {35, 9.556212353964683e-05},
                                       {63, 3.068925988914511e-07}};
  for (auto [i, v] : hf) EXPECT_NEAR(scaled[size_t(i)], v, 1e-15 + 1e-13 * v) << i;
}

TEST(Rope, RejectsBadFrequencyArguments) {
  EXPECT_THROW(rope_inv_freq(7, 10000), Error);
  EXPECT_THROW(rope_inv_freq(8, 0), Error);
  EXPECT_THROW(rope_inv_freq(8, 10000, Llama31Scaling{.low_freq_factor = 4, .high_freq_factor = 4}),
               Error);
}

TEST(Rope, TablesHoldCosAndSinOfPositionTimesFrequency) {
  RopeTables t = rope_tables(5, 6, 100);
  EXPECT_EQ(t.cos.type(), (ir::TypeInfo{DType::f32, Shape{5, 6}}));
  std::vector<double> c = host(t.cos), s = host(t.sin);
  for (int p = 0; p < 5; ++p)
    for (int j = 0; j < 6; ++j) {
      double angle = p * (1 / std::pow(100.0, double(2 * (j % 3)) / 6));
      EXPECT_NEAR(c[size_t(p * 6 + j)], std::cos(angle), 1e-7);
      EXPECT_NEAR(s[size_t(p * 6 + j)], std::sin(angle), 1e-7);
    }
  EXPECT_EQ(rope_tables(3, 4, 10, std::nullopt, DType::bf16).sin.dtype(), DType::bf16);
}

// Rotates each pair (x[i], x[i + D/2]) of x [B, S, H, D] by the angle whose
// cos and sin are the tables' entry i at x's (batch, position).
std::vector<double> rope_ref(const std::vector<double>& x, const std::vector<double>& cos,
                             const std::vector<double>& sin, Shape s, bool per_batch) {
  int64_t B = s[0], S = s[1], H = s[2], D = s[3], half = D / 2;
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < S; ++p)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < half; ++i) {
          size_t base = size_t(((b * S + p) * H + h) * D);
          size_t t = size_t(((per_batch ? b * S : 0) + p) * D + i);
          double x1 = x[base + i], x2 = x[base + i + half];
          y[base + i] = x1 * cos[t] - x2 * sin[t];
          y[base + i + half] = x2 * cos[t] + x1 * sin[t];
        }
  return y;
}

TEST(Rope, RotatesHalvesLikeReference) {
  Shape s{2, 3, 2, 4};
  const std::pair<DType, double> dtypes[] = {
      {DType::f64, 1e-12}, {DType::f32, 2e-6}, {DType::bf16, 2e-2}};
  for (auto [dt, tol] : dtypes) {
    Tensor x = random_tensor(s, dt, 5);
    RopeTables t = rope_tables(3, 4, 10000, std::nullopt, DType::f32);
    Tensor y = rope(x, t.cos, t.sin);
    EXPECT_EQ(y.type(), x.type());
    EXPECT_TRUE(all_close(host(y), rope_ref(host(x), host(t.cos), host(t.sin), s, false), tol, tol))
        << dtype_name(dt);
  }
  // Per-sequence tables [B, S, D]: arbitrary angles per batch entry.
  Tensor x = random_tensor(s, DType::f64, 6);
  Tensor angle = random_tensor({2, 3, 2}, DType::f64, 7, -3, 3);
  std::vector<double> a = host(angle), c, sn;
  for (size_t r = 0; r < 6; ++r)
    for (int rep = 0; rep < 2; ++rep)
      for (size_t i = 0; i < 2; ++i)
        c.push_back(std::cos(a[r * 2 + i])), sn.push_back(std::sin(a[r * 2 + i]));
  Tensor cos = from_vector(c, {2, 3, 4}), sin = from_vector(sn, {2, 3, 4});
  EXPECT_TRUE(all_close(host(rope(x, cos, sin)), rope_ref(host(x), c, sn, s, true), 1e-12, 1e-12));
}

TEST(Rope, DotProductsDependOnRelativePositionOnly) {
  // <rope(q) at m, rope(k) at n> depends on m - n: the point of rotary embeddings.
  int64_t S = 6, D = 8;
  RopeTables t = rope_tables(S, D, 10000, Llama31Scaling{}, DType::f64);
  Tensor q = random_tensor({1, 1, 1, D}, DType::f64, 8).expand({1, S, 1, D});
  Tensor k = random_tensor({1, 1, 1, D}, DType::f64, 9).expand({1, S, 1, D});
  std::vector<double> rq = host(rope(q, t.cos, t.sin)), rk = host(rope(k, t.cos, t.sin));
  auto dot = [&](int64_t m, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += rq[size_t(m * D + i)] * rk[size_t(n * D + i)];
    return s;
  };
  EXPECT_NEAR(dot(3, 1), dot(5, 3), 1e-12);
  EXPECT_NEAR(dot(1, 4), dot(2, 5), 1e-12);
}

TEST(Rope, RejectsBadShapes) {
  RopeTables t = rope_tables(3, 4, 10000);
  EXPECT_THROW(rope(zeros({2, 3, 2, 5}), t.cos, t.sin), Error);  // odd head_dim
  EXPECT_THROW(rope(zeros({2, 4, 2, 4}), t.cos, t.sin), Error);  // wrong seq
  EXPECT_THROW(rope(zeros({3, 2, 4}), t.cos, t.sin), Error);     // rank 3
  EXPECT_THROW(rope(zeros({2, 3, 2, 4}), t.cos, t.sin.to(DType::f64)), Error);
}

TEST(Rope, Gradients) {
  Tensor x = random_tensor({2, 3, 2, 4}, DType::f64, 10);
  Tensor cos = random_tensor({3, 4}, DType::f64, 11), sin = random_tensor({3, 4}, DType::f64, 12);
  EXPECT_TRUE(check_gradients([](const auto& a) { return rope(a[0], a[1], a[2]); }, {x, cos, sin}));
  Tensor cb = random_tensor({2, 3, 4}, DType::f64, 13),
         sb = random_tensor({2, 3, 4}, DType::f64, 14);
  EXPECT_TRUE(check_gradients([](const auto& a) { return rope(a[0], a[1], a[2]); }, {x, cb, sb}));
  Tensor x1 = random_tensor({1, 1, 1, 2}, DType::f64, 15);
  Tensor c1 = random_tensor({1, 2}, DType::f64, 16), s1 = random_tensor({1, 2}, DType::f64, 17);
  EXPECT_TRUE(check_gradients([](const auto& a) { return rope(a[0], a[1], a[2]); }, {x1, c1, s1}));
}

// ----------------------------------------------------------- cross_entropy

// Per-target losses (0 where ignored) of logits [N, V].
std::vector<double> ce_ref(const std::vector<double>& logits, const std::vector<int64_t>& t,
                           int64_t ignore) {
  size_t n = t.size(), v = logits.size() / n;
  std::vector<double> loss(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (t[i] == ignore) continue;
    double m = -INFINITY, s = 0;
    for (size_t j = 0; j < v; ++j) m = std::max(m, logits[i * v + j]);
    for (size_t j = 0; j < v; ++j) s += std::exp(logits[i * v + j] - m);
    loss[i] = m + std::log(s) - logits[i * v + size_t(t[i])];
  }
  return loss;
}

TEST(CrossEntropy, MatchesLoopReferenceWithIgnoredTargets) {
  std::vector<int64_t> t = {2, -100, 0, 4, 1, -100};
  Tensor logits = random_tensor({6, 5}, DType::f64, 20, -4, 4);
  std::vector<double> per = ce_ref(host(logits), t, -100);
  double total = 0;
  for (double l : per) total += l;
  for (DType td : {DType::i64, DType::i32}) {
    Tensor targets = from_vector(t, {6}).to(td);
    EXPECT_TRUE(
        all_close(host(cross_entropy(logits, targets, -100, Reduction::none)), per, 1e-12, 1e-12));
    EXPECT_NEAR(cross_entropy(logits, targets, -100, Reduction::sum).item<double>(), total, 1e-12);
    Tensor mean = cross_entropy(logits, targets);
    EXPECT_EQ(mean.shape(), Shape{});
    EXPECT_NEAR(mean.item<double>(), total / 4, 1e-12);  // 4 targets not ignored
  }
  // Another ignore_index: -100 is then an out-of-range class.
  std::vector<int64_t> t2 = {2, 3, 0, 4, 1, 3};
  Tensor targets2 = from_vector(t2, {6});
  EXPECT_TRUE(all_close(host(cross_entropy(logits, targets2, 3, Reduction::none)),
                        ce_ref(host(logits), t2, 3), 1e-12, 1e-12));
}

TEST(CrossEntropy, ComputesInF32ForBf16AndTakesLeadingDims) {
  std::vector<int64_t> t = {0, 3, 1, 2, -100, 3};
  Tensor logits = random_tensor({2, 3, 4}, DType::bf16, 21, -3, 3);
  Tensor loss = cross_entropy(logits, from_vector(t, {2, 3}), -100, Reduction::none);
  EXPECT_EQ(loss.type(), (ir::TypeInfo{DType::f32, Shape{2, 3}}));
  EXPECT_TRUE(all_close(host(loss), ce_ref(host(logits), t, -100), 1e-5, 1e-5));
  EXPECT_EQ(cross_entropy(logits, from_vector(t, {2, 3})).dtype(), DType::f32);
}

TEST(CrossEntropy, MeanOverNoTargetsIsNaN) {
  EagerModeGuard strict(EagerMode::strict);  // debug mode would (rightly) flag the NaN
  Tensor loss = cross_entropy(zeros({2, 3}), from_vector<int64_t>({-100, -100}, {2}));
  EXPECT_TRUE(std::isnan(loss.item<double>()));
}

TEST(CrossEntropy, RejectsBadTargets) {
  Tensor logits = zeros({3, 4});
  EXPECT_THROW(cross_entropy(logits, from_vector<int64_t>({0, 1}, {2})), Error);
  EXPECT_THROW(cross_entropy(logits, zeros({3})), Error);
  EXPECT_THROW(cross_entropy(zeros({3, 4}, DType::i64), from_vector<int64_t>({0, 1, 2}, {3})),
               Error);
  EXPECT_THROW(apply1(ir::get_op("cross_entropy"), {logits, from_vector<int64_t>({0, 1, 2}, {3})},
                      {{"reduction", std::string("avg")}}),
               Error);
  // A class out of range is caught when the op runs.
  EXPECT_THROW(cross_entropy(logits, from_vector<int64_t>({0, 4, 1}, {3})).item<double>(), Error);
}

TEST(CrossEntropy, Gradients) {
  Tensor logits = random_tensor({4, 5}, DType::f64, 22, -2, 2);
  Tensor targets = from_vector<int64_t>({1, -100, 4, 0}, {4});
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
    EXPECT_TRUE(check_gradients(
        [&](const auto& a) { return cross_entropy(a[0], targets, -100, r); }, {logits}));
  Tensor l3 = random_tensor({2, 1, 3}, DType::f64, 23, -2, 2);
  Tensor t3 = from_vector<int32_t>({2, 0}, {2, 1});
  EXPECT_TRUE(check_gradients([&](const auto& a) { return cross_entropy(a[0], t3); }, {l3}));
}

// --------------------------------------------------------------- attention

// softmax(q k^T * scale + mask) v with the mask rule written out:
// query i sits at position i + (Sk - Sq); causal keeps keys j <= that
// position, a window w also needs j > position - w.
std::vector<double> attention_ref(const Tensor& qt, const Tensor& kt, const Tensor& vt,
                                  const AttentionOptions& o) {
  std::vector<double> q = host(qt), k = host(kt), v = host(vt);
  int64_t B = qt.dim(0), Hq = qt.dim(1), Sq = qt.dim(2), D = qt.dim(3);
  int64_t Hkv = kt.dim(1), Sk = kt.dim(2), Dv = vt.dim(3);
  double scale = o.scale ? *o.scale : 1 / std::sqrt(double(D));
  std::vector<double> out(size_t(B * Hq * Sq * Dv), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t pos = i + Sk - Sq;
        std::vector<double> w(size_t(Sk), 0);
        double m = -INFINITY, total = 0;
        for (int64_t j = 0; j < Sk; ++j) {
          bool seen =
              !o.causal || (j <= pos && (o.sliding_window == 0 || j > pos - o.sliding_window));
          if (!seen) {
            w[size_t(j)] = -INFINITY;
            continue;
          }
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q[size_t(((b * Hq + h) * Sq + i) * D + d)] *
                 k[size_t(((b * Hkv + hk) * Sk + j) * D + d)];
          w[size_t(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        for (double& x : w) total += (x = std::exp(x - m));
        for (int64_t j = 0; j < Sk; ++j)
          for (int64_t d = 0; d < Dv; ++d)
            out[size_t(((b * Hq + h) * Sq + i) * Dv + d)] +=
                w[size_t(j)] / total * v[size_t(((b * Hkv + hk) * Sk + j) * Dv + d)];
      }
    }
  return out;
}

struct AttentionCase {
  const char* name;
  Shape q, k, v;
  AttentionOptions options;
};

std::vector<AttentionCase> attention_cases() {
  return {
      {"full", {2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 3}, {}},
      {"causal", {1, 2, 5, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {.causal = true}},
      {"gqa", {2, 4, 3, 2}, {2, 2, 3, 2}, {2, 2, 3, 2}, {.causal = true}},
      {"mqa_scale", {1, 3, 4, 2}, {1, 1, 4, 2}, {1, 1, 4, 5}, {.scale = 0.7}},
      {"window", {1, 2, 6, 3}, {1, 1, 6, 3}, {1, 1, 6, 3}, {.causal = true, .sliding_window = 2}},
      {"decode", {1, 2, 2, 3}, {1, 2, 5, 3}, {1, 2, 5, 3}, {.causal = true}},
      {"decode_window",
       {1, 2, 3, 3},
       {1, 2, 7, 3},
       {1, 2, 7, 2},
       {.causal = true, .sliding_window = 3}},
  };
}

TEST(Attention, MatchesLoopReference) {
  const std::pair<DType, double> dtypes[] = {
      {DType::f64, 1e-12}, {DType::f32, 1e-5}, {DType::bf16, 2e-2}};
  for (const AttentionCase& c : attention_cases())
    for (auto [dt, tol] : dtypes) {
      Tensor q = random_tensor(c.q, dt, 30, -2, 2), k = random_tensor(c.k, dt, 31, -2, 2);
      Tensor v = random_tensor(c.v, dt, 32);
      Tensor y = scaled_dot_product_attention(q, k, v, c.options);
      EXPECT_EQ(y.type(), (ir::TypeInfo{dt, Shape{c.q[0], c.q[1], c.q[2], c.v[3]}})) << c.name;
      EXPECT_TRUE(all_close(host(y), attention_ref(q, k, v, c.options), tol, tol))
          << c.name << " " << dtype_name(dt);
    }
}

TEST(Attention, SlidingWindowSeesTheLastWPositions) {
  // With v the identity, row i of the output is query i's attention weights:
  // nonzero exactly for i - w < j <= i.
  int64_t S = 6, w = 3;
  std::vector<double> eye(size_t(S * S), 0);
  for (int64_t j = 0; j < S; ++j) eye[size_t(j * S + j)] = 1;
  Tensor v = from_vector(eye, {1, 1, S, S});
  Tensor q = random_tensor({1, 1, S, 4}, DType::f64, 33),
         k = random_tensor({1, 1, S, 4}, DType::f64, 34);
  std::vector<double> p =
      host(scaled_dot_product_attention(q, k, v, {.causal = true, .sliding_window = w}));
  for (int64_t i = 0; i < S; ++i) {
    double row = 0;
    for (int64_t j = 0; j < S; ++j) {
      double pij = p[size_t(i * S + j)];
      row += pij;
      if (i - w < j && j <= i)
        EXPECT_GT(pij, 0) << i << "," << j;
      else
        EXPECT_EQ(pij, 0) << i << "," << j;
    }
    EXPECT_NEAR(row, 1, 1e-12);
  }
}

TEST(Attention, RunsInDebugModeDespiteTheMask) {
  EagerModeGuard debug(EagerMode::debug);
  Tensor q = random_tensor({1, 2, 4, 2}, DType::f32, 35);
  AttentionOptions o{.causal = true};
  EXPECT_TRUE(all_close(host(scaled_dot_product_attention(q, q, q, o)), attention_ref(q, q, q, o),
                        1e-5, 1e-5));
}

TEST(Attention, RejectsBadShapesAndOptions) {
  Tensor q = zeros({1, 3, 4, 2}), k = zeros({1, 2, 4, 2});
  EXPECT_THROW(scaled_dot_product_attention(q, k, k), Error);  // 3 heads over 2
  Tensor q4 = zeros({1, 4, 4, 2});
  EXPECT_THROW(scaled_dot_product_attention(q4, k, zeros({1, 2, 3, 2})), Error);  // v kv_len
  EXPECT_THROW(scaled_dot_product_attention(q4, zeros({1, 2, 4, 3}), k), Error);  // head_dim
  EXPECT_THROW(scaled_dot_product_attention(q4, k, k.to(DType::f64)), Error);
  EXPECT_THROW(scaled_dot_product_attention(q4, k, k, {.sliding_window = 2}), Error);  // not causal
  EXPECT_THROW(scaled_dot_product_attention(zeros({1, 2, 5, 2}), k, k, {.causal = true}), Error);
  EXPECT_THROW(scaled_dot_product_attention(zeros({4, 4, 2}), k, k), Error);
}

TEST(Attention, Gradients) {
  for (const AttentionCase& c : attention_cases()) {
    Tensor q = random_tensor(c.q, DType::f64, 36), k = random_tensor(c.k, DType::f64, 37);
    Tensor v = random_tensor(c.v, DType::f64, 38);
    AttentionOptions o = c.options;
    EXPECT_TRUE(check_gradients(
        [o](const auto& a) { return scaled_dot_product_attention(a[0], a[1], a[2], o); },
        {q, k, v}))
        << c.name;
  }
}

}  // namespace
}  // namespace kiln
