// The MoE block: routing (top-k, renormalisation, counts), the composite and
// grouped expert paths against a naive per-token loop written here,
// gradients against finite differences, and the load-balancing loss against
// HF's formula evaluated by hand.
#include "kiln/nn/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/kiln.h"
#include "kiln/nn/token_dispatcher.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln::nn {
namespace {

using test::all_close;
using test::check_gradients;
using Vec = std::vector<double>;

MoEConfig small(bool norm, const std::string& impl = "composite") {
  MoEConfig c;
  c.dim = 6;
  c.n_experts = 5;
  c.top_k = 2;
  c.ffn_dim = 4;
  c.norm_topk_prob = norm;
  c.impl = impl;
  return c;
}

std::unique_ptr<MoE> make(const MoEConfig& c, uint64_t seed, DType dtype = DType::f64) {
  auto m = std::make_unique<MoE>(c, dtype);
  Generator g(seed);
  m->init_parameters(g, 0.5);
  return m;
}

TEST(MoE, ParameterNamesAndShapes) {
  MoE m(small(true));
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"experts.gate_up_proj", "experts.down_proj",
                                             "gate.weight"}));
  EXPECT_EQ(m.experts.gate_up_proj.shape(), Shape({5, 8, 6}));
  EXPECT_EQ(m.experts.down_proj.shape(), Shape({5, 6, 4}));
  EXPECT_EQ(m.gate.weight.shape(), Shape({5, 6}));
}

// Per token: softmax of the router logits, the top_k largest, optionally
// renormalised, and sum_k w_k * down_e(silu(gate_e x) * up_e x). With a
// `capacity`, an expert takes only its first `capacity` assignments in
// token order (the capacity dispatcher's policy); `dropped` counts the rest.
Vec reference(const MoE& m, const Vec& x, int64_t T, std::vector<int64_t>* counts,
              int64_t capacity = -1, int64_t* dropped = nullptr) {
  const MoEConfig& c = m.config;
  const int64_t D = c.dim, F = c.ffn_dim, E = c.n_experts;
  Vec router = m.gate.weight.to_vector<double>(), gu = m.experts.gate_up_proj.to_vector<double>(),
      dn = m.experts.down_proj.to_vector<double>();
  Vec out(size_t(T * D), 0);
  counts->assign(size_t(E), 0);
  for (int64_t t = 0; t < T; ++t) {
    const double* xt = &x[size_t(t * D)];
    Vec p(static_cast<size_t>(E));
    double mx = -1e300, z = 0;
    for (int64_t e = 0; e < E; ++e) {
      p[e] = 0;
      for (int64_t d = 0; d < D; ++d) p[e] += router[e * D + d] * xt[d];
      mx = std::max(mx, p[e]);
    }
    for (double& v : p) z += (v = std::exp(v - mx));
    for (double& v : p) v /= z;
    std::vector<int64_t> idx(static_cast<size_t>(E));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double wsum = 0;
    for (int64_t k = 0; k < c.top_k; ++k) wsum += p[idx[k]];
    for (int64_t k = 0; k < c.top_k; ++k) {
      int64_t e = idx[k];
      if (capacity >= 0 && (*counts)[e] >= capacity) {
        ++(*counts)[e], ++*dropped;
        continue;
      }
      ++(*counts)[e];
      double w = c.norm_topk_prob ? p[e] / wsum : p[e];
      Vec h(static_cast<size_t>(F));
      for (int64_t f = 0; f < F; ++f) {
        double g = 0, u = 0;
        for (int64_t d = 0; d < D; ++d) {
          g += gu[(e * 2 * F + f) * D + d] * xt[d];
          u += gu[(e * 2 * F + F + f) * D + d] * xt[d];
        }
        h[f] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t d = 0; d < D; ++d)
        for (int64_t f = 0; f < F; ++f) out[t * D + d] += w * dn[(e * D + d) * F + f] * h[f];
    }
  }
  return out;
}

TEST(MoE, MatchesLoopReference) {
  for (bool norm : {true, false})
    for (const std::string& impl : moe_impls().names()) {
      auto m = make(small(norm, impl), 21);
      Generator g(4);
      Tensor x = randn({3, 7, 6}, g, DType::f64);
      Routing r;
      Tensor y = m->forward(x, &r);
      EXPECT_EQ(y.shape(), x.shape());
      std::vector<int64_t> counts;
      Vec ref = reference(*m, x.to_vector<double>(), 21, &counts);
      EXPECT_TRUE(all_close(y.to_vector<double>(), ref, 1e-10, 1e-12)) << impl << " " << norm;
      EXPECT_EQ(r.counts.to_vector<int64_t>(), counts);
    }
}

// The capacity dispatcher at ep 1: static shapes, the same outputs as the
// loop with nothing dropped, and the documented drops below capacity.
TEST(MoE, CapacityDispatcherKeepsTheFirstAssignmentsOfEachExpert) {
  const int64_t T = 21, N = T * 2;  // top_k 2 of 5 experts
  for (double factor : {5.0, 1.0, 0.5}) {
    auto m = make(small(true, "grouped"), 21);
    m->set_dispatcher(capacity_dispatcher({"ep", 1}, factor));
    Generator g(4);
    Tensor x = randn({3, 7, 6}, g, DType::f64);
    Routing r;
    Tensor y = m->forward(x, &r);
    const int64_t capacity = int64_t(std::ceil(factor * double(N) / 5));
    std::vector<int64_t> counts;
    int64_t dropped = 0;
    Vec ref = reference(*m, x.to_vector<double>(), T, &counts, capacity, &dropped);
    EXPECT_TRUE(all_close(y.to_vector<double>(), ref, 1e-10, 1e-12)) << factor;
    EXPECT_EQ(r.dropped.item<int64_t>(), dropped) << factor;
    EXPECT_EQ(r.counts.to_vector<int64_t>(), counts) << "counts are the router's, drops included";
    if (factor == 5.0) {
      EXPECT_EQ(dropped, 0);
    }
    if (factor == 0.5) {
      EXPECT_GT(dropped, 0);
    }
  }
}

TEST(MoE, CompositeRefusesADispatcher) {
  MoE m(small(true, "composite"));
  EXPECT_THROW(m.set_dispatcher(capacity_dispatcher({"ep", 1}, 1.0)), Error);
  EXPECT_NO_THROW(m.set_dispatcher(local_dispatcher()));
  EXPECT_THROW(make_dispatcher("local", {"ep", 2}, 1.0), Error);
  EXPECT_THROW(make_dispatcher("ring", {"ep", 1}, 1.0), Error);
  EXPECT_THROW(capacity_dispatcher({"ep", 1}, 0.0), Error);
}

// ST-MoE's z-loss: the mean over tokens of log(sum_e exp(logit_e))^2.
TEST(MoE, RouterZLossByHand) {
  auto m = make(small(true), 3);
  Generator g(8);
  Tensor x = randn({6, 6}, g, DType::f64);
  Vec xs = x.to_vector<double>(), w = m->gate.weight.to_vector<double>();
  double want = 0;
  for (int64_t t = 0; t < 6; ++t) {
    double z = 0;
    for (int64_t e = 0; e < 5; ++e) {
      double logit = 0;
      for (int64_t d = 0; d < 6; ++d) logit += w[size_t(e * 6 + d)] * xs[size_t(t * 6 + d)];
      z += std::exp(logit);
    }
    want += std::log(z) * std::log(z) / 6;
  }
  EXPECT_NEAR(m->route(x).z_loss.item<double>(), want, 1e-12);
}

// DeepSeek-V3's balancing bias picks the experts; the weights stay the
// unbiased probabilities (renormalised as usual).
TEST(MoE, RoutingBiasChoosesTheExpertsButNotTheWeights) {
  MoEConfig c = small(false);
  c.routing_bias = true;
  auto m = make(c, 3);
  ASSERT_TRUE(m->gate.e_score_correction_bias.defined());
  EXPECT_EQ(m->gate.e_score_correction_bias.to_vector<double>(), Vec(5, 0.0)) << "zeros at init";
  Generator g(8);
  Tensor x = randn({20, 6}, g, DType::f64);
  Routing plain = m->route(x);
  m->gate.e_score_correction_bias = from_vector<double>({0, 0, 0, 0, 10}, {5});
  Routing r = m->route(x);
  std::vector<int64_t> idx = r.indices.to_vector<int64_t>(),
                       plain_idx = plain.indices.to_vector<int64_t>();
  Vec probs = r.probs.to_vector<double>(), w = r.weights.to_vector<double>();
  EXPECT_EQ(probs, plain.probs.to_vector<double>()) << "the bias leaves the scores";
  for (int64_t t = 0; t < 20; ++t) {
    EXPECT_EQ(idx[size_t(t * 2)], 4) << "token " << t;  // the biased expert first
    // The other slot: the token's best expert other than 4.
    int64_t best =
        plain_idx[size_t(t * 2)] == 4 ? plain_idx[size_t(t * 2 + 1)] : plain_idx[size_t(t * 2)];
    EXPECT_EQ(idx[size_t(t * 2 + 1)], best) << "token " << t;
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(w[size_t(t * 2 + k)], probs[size_t(t * 5 + idx[size_t(t * 2 + k)])]);
  }
}

TEST(MoE, RoutingWeightsAndCounts) {
  for (bool norm : {true, false}) {
    auto m = make(small(norm), 3, DType::f32);
    Generator g(8);
    Routing r = m->route(randn({40, 6}, g));
    EXPECT_EQ(r.indices.shape(), Shape({40, 2}));
    EXPECT_EQ(r.probs.shape(), Shape({40, 5}));
    Vec sums = sum(r.weights, {1}).to_vector<double>();
    Vec probs = r.probs.to_vector<double>();
    std::vector<int64_t> idx = r.indices.to_vector<int64_t>();
    Vec w = r.weights.to_vector<double>();
    for (int64_t t = 0; t < 40; ++t) {
      if (norm) EXPECT_NEAR(sums[t], 1, 1e-6);
      else EXPECT_LT(sums[t], 1);
      // The chosen experts are the two most probable, highest first.
      Vec row(probs.begin() + t * 5, probs.begin() + (t + 1) * 5);
      int64_t best = std::max_element(row.begin(), row.end()) - row.begin();
      EXPECT_EQ(idx[t * 2], best);
      EXPECT_GE(row[idx[t * 2]], row[idx[t * 2 + 1]]);
      EXPECT_GE(w[t * 2], w[t * 2 + 1]);
    }
    std::vector<int64_t> counts = r.counts.to_vector<int64_t>();
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), 40 * 2);
  }
}

TEST(MoE, Gradients) {
  // Capacity 0.5: some assignments dropped (their gradient is zero).
  std::vector<std::pair<std::string, double>> cases{{"capacity", 0.5}, {"capacity", 4.0}};
  for (const std::string& impl : moe_impls().names()) cases.push_back({impl, 0});
  for (const auto& [impl, factor] : cases) {
    MoEConfig c =
        small(true, factor > 0 ? "grouped"
                               : impl);  // smaller: finite differences cost 2 runs per element
    c.dim = 3;
    c.ffn_dim = 2;
    c.n_experts = 4;
    auto m = make(c, 5);
    if (factor > 0) m->set_dispatcher(capacity_dispatcher({"ep", 1}, factor));
    Generator g(6);
    Tensor x = randn({4, 3}, g, DType::f64);
    std::vector<Tensor> args = m->parameters();
    args.push_back(x);
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) {
          ParameterScope scope(*m, {a.begin(), a.end() - 1});
          return m->forward(a.back());
        },
        args))
        << impl << " " << factor;
  }
}

// HF: tokens_per_expert = mean over tokens of one_hot(topk) [k, E];
// router_prob = mean over tokens of softmax [E]; loss = E * sum(products).
TEST(MoE, LoadBalancingLossByHand) {
  Routing a, b;
  a.probs = from_vector<double>({0.7, 0.2, 0.1, 0.1, 0.3, 0.6}, {2, 3}, kCPU);
  a.indices = from_vector<int64_t>({0, 1, 2, 1}, {2, 2}, kCPU);
  b.probs = from_vector<double>({0.5, 0.25, 0.25}, {1, 3}, kCPU);
  b.indices = from_vector<int64_t>({0, 1}, {1, 2}, kCPU);
  // Slot 0 picks experts 0, 2, 0 -> f = [2/3, 0, 1/3]; slot 1 picks 1, 1, 1 -> [0, 1, 0].
  // P = ([0.7, 0.2, 0.1] + [0.1, 0.3, 0.6] + [0.5, 0.25, 0.25]) / 3 = [1.3, 0.75, 0.95] / 3.
  double expected = 3 * ((2.0 / 3) * 1.3 / 3 + (1.0 / 3) * 0.95 / 3 + 0.75 / 3);
  EXPECT_NEAR(load_balancing_loss({a, b}, 3, 2).item<double>(), expected, 1e-12);
  EXPECT_THROW(load_balancing_loss({}, 3, 2), Error);
}

TEST(MoE, BadConfig) {
  MoEConfig c = small(true);
  c.top_k = 6;
  EXPECT_THROW(MoE{c}, Error);
  c = small(true, "sparse");
  EXPECT_THROW(MoE{c}, Error);
}

}  // namespace
}  // namespace kiln::nn
