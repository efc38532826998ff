// The token dispatchers over an "ep" axis of the whole MPI world (ctest runs
// this on 2 and 4 ranks), an MoE layer of 2 experts per rank: with its
// experts split, the layer gives each rank the outputs the whole layer
// gives its tokens in one process (all_to_all, and capacity with room for
// every token); the gradients of dispatch, experts and combine match
// central differences of the sum of every rank's loss; a rank no token is
// routed to works; and row counts that disagree fail on every rank naming
// the ranks, without a hang.
#include <gtest/gtest.h>

#include <chrono>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/nn/moe.h"
#include "kiln/nn/token_dispatcher.h"
#include "tests/support/support.h"

namespace kiln::nn {
namespace {

using test::all_close;
using namespace std::chrono_literals;

// The mesh: every rank on ep (dp_shard = ep = world size).
const std::shared_ptr<dist::DeviceMesh>& mesh() {
  static std::shared_ptr<dist::DeviceMesh> m = [] {
    auto w = dist::world();
    w->set_timeout(30s);  // a failed assertion on one rank must not hang the others for long
    dist::MeshDegrees d;
    d.expert_parallel_degree = w->size();
    auto built = std::make_shared<dist::DeviceMesh>(w, d);
    dist::set_current_mesh(built);
    return built;
  }();
  return m;
}
int ranks() { return int(mesh()->size("ep")); }
int rank() { return int(mesh()->coordinate("ep")); }
MeshAxis ep() { return {"ep", ranks()}; }

MoEConfig layer_config() {
  MoEConfig c;
  c.dim = 4;
  c.ffn_dim = 3;
  c.n_experts = 2 * ranks();
  c.top_k = 2;
  c.impl = "grouped";
  return c;
}

// The whole layer (the same on every rank: one seed) and this rank's part of it.
std::unique_ptr<MoE> whole_layer() {
  auto m = std::make_unique<MoE>(layer_config(), DType::f64);
  Generator g(11);
  m->init_parameters(g, 0.5);
  return m;
}
std::unique_ptr<MoE> rank_layer(std::shared_ptr<const TokenDispatcher> dispatcher) {
  auto m = whole_layer();
  const int64_t k = m->config.n_experts / ranks();
  for (Tensor* p : {&m->experts.gate_up_proj, &m->experts.down_proj})
    *p = p->slice(0, rank() * k, (rank() + 1) * k).contiguous();
  m->set_dispatcher(std::move(dispatcher));
  return m;
}

// This rank's tokens: another batch on every rank.
Tensor tokens(int64_t T = 9) {
  Generator g(uint64_t(100 + rank()));
  return randn({T, 4}, g, DType::f64);
}

std::vector<std::shared_ptr<const TokenDispatcher>> dispatchers() {
  // Capacity E / top_k: an expert takes at most every token once.
  return {all_to_all_dispatcher(ep()), capacity_dispatcher(ep(), double(ranks()))};
}

TEST(TokenDispatch, SplitExpertsGiveTheWholeLayersOutputs) {
  Tensor x = tokens();
  Tensor want = whole_layer()->forward(x);
  for (const auto& d : dispatchers()) {
    Routing r;
    Tensor got = rank_layer(d)->forward(x, &r);
    EXPECT_TRUE(all_close(got, want, 1e-12, 1e-12)) << d->describe() << ", rank " << rank();
    EXPECT_EQ(r.dropped.item<int64_t>(), 0) << d->describe();
  }
}

// sum over ranks of sum(y * c), c a fixed cotangent per rank.
double global_loss(const Tensor& local) {
  double mine = local.item<double>(), all = 0;
  mesh()->world().all_reduce(&mine, &all, 1, DType::f64).wait();
  return all;
}

// The autograd gradient of every rank's local loss (the exchanges' backward
// brings the other ranks' cotangents) against central differences of the
// global loss, one rank perturbing one element at a time.
TEST(TokenDispatch, GradientsMatchFiniteDifferences) {
  // 0.5: some assignments dropped (their gradients are zero).
  std::vector<std::shared_ptr<const TokenDispatcher>> all = dispatchers();
  all.push_back(capacity_dispatcher(ep(), 0.5));
  for (const auto& d : all) {
    auto m = rank_layer(d);
    Generator g(uint64_t(200 + rank()));
    Tensor c = randn({9, 4}, g, DType::f64);
    auto loss = [&](const std::vector<Tensor>& a) {
      ParameterScope scope(*m, {a[0], a[1], a[2]});
      return std::vector<Tensor>{sum(m->forward(a[3]) * c)};
    };
    std::vector<Tensor> args = m->parameters();
    args.push_back(tokens());
    ValueAndGrad vg = kiln::value_and_grad(loss)(args);
    const double eps = 1e-6;
    for (int p = 0; p < ranks(); ++p)
      for (size_t a = 0; a < args.size(); ++a)
        for (int64_t i = 0; i < args[a].numel(); i += 5) {
          auto at = [&](double delta) {
            std::vector<Tensor> moved = args;
            if (rank() == p) {
              std::vector<double> v = args[a].to_vector<double>();
              v[size_t(i)] += delta;
              moved[a] = from_vector(v, args[a].shape());
            }
            return global_loss(loss(moved)[0]);
          };
          const double fd = (at(eps) - at(-eps)) / (2 * eps);
          if (rank() == p) {
            const double ad = vg.grads[a].to_vector<double>()[size_t(i)];
            EXPECT_NEAR(ad, fd, 1e-6 * (1 + std::abs(fd)))
                << d->describe() << ": rank " << p << ", argument " << a << ", element " << i;
          }
        }
  }
}

TEST(TokenDispatch, ARankNoTokenIsRoutedToWorks) {
  // Positive tokens, and a router that prefers rank 0's experts (0 and 1).
  Tensor x = abs(tokens()) + 0.1;
  auto route_to_rank0 = [](MoE& m) {
    std::vector<double> w(size_t(m.config.n_experts * 4), -1.0);
    for (int j = 0; j < 8; ++j) w[size_t(j)] = 1.0 + 0.1 * j;
    m.gate.weight = from_vector(w, {m.config.n_experts, 4});
  };
  auto whole = whole_layer();
  route_to_rank0(*whole);
  Tensor want = whole->forward(x);
  for (const auto& d : dispatchers()) {
    auto m = rank_layer(d);
    route_to_rank0(*m);
    auto loss = [&](const std::vector<Tensor>& a) {
      ParameterScope scope(*m, {a[0], a[1], a[2]});
      return std::vector<Tensor>{sum(m->forward(a[3]))};
    };
    std::vector<Tensor> args = m->parameters();
    args.push_back(x);
    {
      ParameterScope scope(*m, {args[0], args[1], args[2]});
      EXPECT_TRUE(all_close(m->forward(x), want, 1e-12, 1e-12)) << d->describe();
    }
    ValueAndGrad vg = kiln::value_and_grad(loss)(args);
    const double expert_grad = sum(abs(vg.grads[0])).item<double>();
    if (rank() == 0)
      EXPECT_GT(expert_grad, 0) << d->describe();
    else
      EXPECT_EQ(expert_grad, 0) << d->describe() << ": rank " << rank() << " got no tokens";
  }
}

TEST(TokenDispatch, RowCountsThatDisagreeFailOnEveryRankNamingThem) {
  const int n = ranks();
  std::vector<double> rows;
  for (int j = 0; j < n; ++j) rows.insert(rows.end(), {double(100 * rank() + j), 0.5});
  Tensor x = from_vector(rows, {n, 2});  // row j goes to rank j
  std::vector<int64_t> ones(size_t(n), 1), wrong = ones;
  if (rank() == 1) wrong[0] = 2;  // rank 1 expects 2 rows from rank 0, which sends 1
  Tensor send = from_vector(ones, {n});
  try {
    all_to_all_v(x, send, from_vector(wrong, {n}), 2 * n, ep()).to_vector<double>();
    ADD_FAILURE() << "rank " << rank() << ": no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the ranks disagree on the rows they exchange"), std::string::npos) << m;
    EXPECT_NE(m.find("world ranks 1 expect other counts"), std::string::npos) << m;
  }
  // The group still works: row j of rank p arrives at rank j, from p in order.
  std::vector<double> got = all_to_all_v(x, send, send, n + 1, ep()).to_vector<double>();
  for (int p = 0; p < n; ++p) EXPECT_EQ(got[size_t(2 * p)], 100 * p + rank());
  EXPECT_EQ(got[size_t(2 * n)], 0) << "the tail row is padding";
}

}  // namespace
}  // namespace kiln::nn
