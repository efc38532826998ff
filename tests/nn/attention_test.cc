// Attention against a naive per-token loop written here (projections, per-
// head q/k RMSNorm, rotary embedding, GQA, causal softmax), document masking
// against separate runs per document, and the flash path against the
// composite.
#include "kiln/nn/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"
#include "kiln/nn/rotary.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/rope.h"
#include "tests/support/support.h"

namespace kiln::nn {
namespace {

using test::all_close;

std::vector<std::string> names(Module& m) {
  std::vector<std::string> out;
  for (auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

AttentionConfig small(bool qk_norm) {
  AttentionConfig c;
  c.dim = 12;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 6;  // n_heads * head_dim != dim, as in Qwen3
  c.qk_norm = qk_norm;
  c.norm_eps = 1e-6;
  return c;
}

TEST(Attention, ParameterNames) {
  Attention llama(small(false));
  EXPECT_EQ(names(llama), (std::vector<std::string>{"q_proj.weight", "k_proj.weight",
                                                    "v_proj.weight", "o_proj.weight"}));
  AttentionConfig c = small(true);
  c.bias = true;
  Attention qwen(c);
  EXPECT_EQ(names(qwen),
            (std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight",
                                      "k_proj.bias", "v_proj.weight", "v_proj.bias",
                                      "o_proj.weight", "o_proj.bias", "q_norm.weight",
                                      "k_norm.weight"}));
  EXPECT_EQ(qwen.q_proj.weight.shape(), Shape({24, 12}));
  EXPECT_EQ(qwen.k_proj.weight.shape(), Shape({12, 12}));
  EXPECT_EQ(qwen.o_proj.weight.shape(), Shape({12, 24}));
}

// Row-major helpers for the reference.
using Vec = std::vector<double>;
Vec matvec(const Vec& w, const Vec& x, int64_t rows, int64_t cols) {
  Vec y(size_t(rows), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
  return y;
}

// The attention output for x [B, S, dim] by loops; rope angles
// position * theta^(-2i / head_dim), i < head_dim / 2, on both halves.
Vec reference(const Attention& a, const Vec& x, int64_t B, int64_t S, double theta) {
  const AttentionConfig& c = a.config;
  const int64_t H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, D = c.dim, G = H / KV;
  Vec wq = a.q_proj.weight.to_vector<double>(), wk = a.k_proj.weight.to_vector<double>(),
      wv = a.v_proj.weight.to_vector<double>(), wo = a.o_proj.weight.to_vector<double>();
  Vec qn = a.q_norm ? a.q_norm->weight.to_vector<double>() : Vec(size_t(hd), 1);
  Vec kn = a.k_norm ? a.k_norm->weight.to_vector<double>() : Vec(size_t(hd), 1);
  auto norm_rope = [&](Vec v, int64_t heads, const Vec& w, int64_t pos) {
    for (int64_t h = 0; h < heads; ++h) {
      double* p = &v[size_t(h * hd)];
      if (a.q_norm) {
        double ss = 0;
        for (int64_t j = 0; j < hd; ++j) ss += p[j] * p[j];
        double inv = 1 / std::sqrt(ss / double(hd) + c.norm_eps);
        for (int64_t j = 0; j < hd; ++j) p[j] *= inv * w[j];
      }
      Vec r(static_cast<size_t>(hd));
      for (int64_t j = 0; j < hd; ++j) {
        double angle = double(pos) * std::pow(theta, -2.0 * double(j % (hd / 2)) / double(hd));
        double rot = j < hd / 2 ? -p[j + hd / 2] : p[j - hd / 2];
        r[j] = p[j] * std::cos(angle) + rot * std::sin(angle);
      }
      std::copy(r.begin(), r.end(), p);
    }
    return v;
  };
  Vec out(static_cast<size_t>(B * S * D));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<Vec> q(S), k(S), v(S);
    for (int64_t s = 0; s < S; ++s) {
      Vec xs(x.begin() + (b * S + s) * D, x.begin() + (b * S + s + 1) * D);
      q[s] = norm_rope(matvec(wq, xs, H * hd, D), H, qn, s);
      k[s] = norm_rope(matvec(wk, xs, KV * hd, D), KV, kn, s);
      v[s] = matvec(wv, xs, KV * hd, D);
    }
    for (int64_t s = 0; s < S; ++s) {
      Vec o(size_t(H * hd), 0);
      for (int64_t h = 0; h < H; ++h) {
        int64_t g = h / G;
        Vec score(static_cast<size_t>(s + 1));
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j <= s; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += q[s][h * hd + e] * k[j][g * hd + e];
          score[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, score[j]);
        }
        for (double& sc : score) z += (sc = std::exp(sc - mx));
        for (int64_t j = 0; j <= s; ++j)
          for (int64_t e = 0; e < hd; ++e) o[h * hd + e] += score[j] / z * v[j][g * hd + e];
      }
      Vec y = matvec(wo, o, D, H * hd);
      std::copy(y.begin(), y.end(), out.begin() + (b * S + s) * D);
    }
  }
  return out;
}

TEST(Attention, MatchesLoopReference) {
  for (bool qk_norm : {false, true}) {
    Attention a(small(qk_norm), DType::f64);
    Generator g(7);
    a.init_parameters(g, 0.3);
    if (a.q_norm) a.q_norm->weight = randn({6}, g, DType::f64);
    const int64_t B = 2, S = 5;
    Tensor x = randn({B, S, 12}, g, DType::f64);
    RotaryEmbedding rope(6, 10000, std::nullopt, 16);
    RopeTables t = rope.tables(S, DType::f64);
    Tensor y = a.forward(x, t.cos, t.sin);
    EXPECT_EQ(y.shape(), Shape({B, S, 12}));
    EXPECT_TRUE(all_close(y.to_vector<double>(), reference(a, x.to_vector<double>(), B, S, 10000),
                          1e-10, 1e-12))
        << "qk_norm " << qk_norm;
  }
}

// Two packed documents with positions restarting at each give the same
// outputs as the documents run on their own.
TEST(Attention, DocumentMaskingEqualsSeparateRuns) {
  for (const std::string& impl : attention_impls().names()) {
    AttentionConfig c = small(true);
    c.impl = impl;
    Attention a(c, DType::f64);
    Generator g(9);
    a.init_parameters(g, 0.3);
    RotaryEmbedding rope(6, 10000, std::nullopt, 16);
    const int64_t S = 7, first = 3;
    Tensor x = randn({1, S, 12}, g, DType::f64);
    Tensor docs = from_vector<int64_t>({4, 4, 4, 9, 9, 9, 9}, {1, S}, kCPU);
    Tensor pos = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 3}, {1, S}, kCPU);
    RopeTables packed = rope.tables(S, DType::f64, pos);
    Tensor y = a.forward(x, packed.cos, packed.sin, docs);
    for (auto [start, len] : {std::pair<int64_t, int64_t>{0, first}, {first, S - first}}) {
      RopeTables t = rope.tables(len, DType::f64);
      Tensor alone = a.forward(x.slice(1, start, start + len), t.cos, t.sin);
      EXPECT_TRUE(all_close(y.slice(1, start, start + len), alone, 1e-10, 1e-12)) << impl;
    }
  }
}

TEST(Attention, OneDocumentIsPlainCausalAndFlashMatchesComposite) {
  Generator g(3);
  const int64_t B = 2, S = 9;
  Tensor q = randn({B, 4, S, 8}, g, DType::f64), k = randn({B, 2, S, 8}, g, DType::f64),
         v = randn({B, 2, S, 5}, g, DType::f64);
  AttentionOptions causal;
  causal.causal = true;
  Tensor plain = scaled_dot_product_attention(q, k, v, causal);
  Tensor same = zeros({B, S}, DType::i64);
  EXPECT_TRUE(all_close(document_causal_attention(q, k, v, same), plain, 1e-12, 1e-14));
  Tensor docs = from_vector<int64_t>({0, 0, 1, 1, 1, 2, 2, 2, 2, 5, 5, 5, 5, 5, 5, 6, 6, 6},
                                     {B, S}, kCPU);
  EXPECT_TRUE(all_close(flash_attention(q, k, v, causal, docs),
                        document_causal_attention(q, k, v, docs), 1e-10, 1e-12));
}

TEST(Rotary, PositionsGatherTheTable) {
  RotaryEmbedding rope(8, 500000, Llama31Scaling{}, 10);
  RopeTables plain = rope.tables(4, DType::f32);
  EXPECT_EQ(plain.cos.shape(), Shape({4, 8}));
  Tensor pos = from_vector<int64_t>({0, 1, 2, 3, 3, 2, 1, 0}, {2, 4}, kCPU);
  RopeTables gathered = rope.tables(4, DType::f32, pos);
  EXPECT_EQ(gathered.sin.shape(), Shape({2, 4, 8}));
  EXPECT_TRUE(all_close(gathered.sin.select(0, 0), plain.sin, 0, 0));
  EXPECT_TRUE(all_close(gathered.cos.select(0, 1).select(0, 0), plain.cos.select(0, 3), 0, 0));
  // Longer than the cached length: computed on the spot.
  RopeTables longer = rope.tables(12, DType::f32);
  EXPECT_TRUE(all_close(longer.cos.slice(0, 0, 4), plain.cos, 0, 0));
  RopeTables direct = rope_tables(12, 8, 500000, Llama31Scaling{});
  EXPECT_TRUE(all_close(longer.sin, direct.sin, 0, 0));
}

}  // namespace
}  // namespace kiln::nn
