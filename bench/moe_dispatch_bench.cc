// One MoE layer's forward + backward under a token dispatcher, on the
// ranks of `mpirun -n N` (the experts split over all of them: ep = N), and
// the same with the experts left out (dispatch then combine of the
// dispatched rows), whose time is what the dispatcher costs. Rank 0 prints
// one line: dispatcher, ranks, tokens/s per rank, the step's and the
// dispatch + combine's milliseconds (medians) and the fraction of the step
// they take. bench/moe_dispatch.sh runs the table.
// Usage: moe_dispatch_bench local|all_to_all|capacity [tokens_per_rank] [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/autograd/grad.h"
#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/nn/moe.h"
#include "kiln/nn/token_dispatcher.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

constexpr int64_t kDim = 256, kFfn = 256, kExperts = 16, kTopK = 2;

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of `fn` (after two warm-up runs), the ranks in step.
template <class F>
double time_ms(int iterations, dist::ProcessGroup& world, F fn) {
  std::vector<double> ms;
  for (int i = 0; i < iterations + 2; ++i) {
    world.barrier().wait();
    auto t0 = Clock::now();
    fn();
    if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median_ms(ms);
}

int run(int argc, char** argv) {
  const std::string kind = argc > 1 ? argv[1] : "all_to_all";
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 10;
  auto world = dist::world();
  dist::MeshDegrees degrees;
  degrees.expert_parallel_degree = world->size();
  auto mesh = std::make_shared<dist::DeviceMesh>(world, degrees);
  dist::set_current_mesh(mesh);
  const int n = world->size(), rank = world->rank();

  nn::MoEConfig c{.dim = kDim, .n_experts = kExperts, .top_k = kTopK, .ffn_dim = kFfn};
  c.impl = "grouped";
  nn::MoE moe(c);
  Generator g(1);
  moe.init_parameters(g, 0.02);
  const int64_t local = kExperts / n;
  for (Tensor* p : {&moe.experts.gate_up_proj, &moe.experts.down_proj})
    *p = p->slice(0, rank * local, (rank + 1) * local).contiguous();
  // Capacity 1.25, TorchTitan's and GShard's usual factor.
  auto dispatcher = nn::make_dispatcher(kind, {"ep", n}, 1.25);
  moe.set_dispatcher(dispatcher);

  Generator data(uint64_t(10 + rank));
  Tensor x = randn({tokens, kDim}, data), cot = randn({tokens, kDim}, data);
  std::vector<Tensor> args = moe.parameters();
  args.push_back(x);
  auto step = value_and_grad([&](const std::vector<Tensor>& a) {
    nn::ParameterScope scope(moe, {a.begin(), a.end() - 1});
    return std::vector<Tensor>{sum(moe.forward(a.back()) * cot)};
  });
  // Dispatch and combine alone (the routing made once, outside): the
  // dispatched rows combined as they are.
  const nn::Routing routing = moe.route(x);
  auto exchange = value_and_grad([&](const std::vector<Tensor>& a) {
    nn::Dispatched d = dispatcher->dispatch(a[0], routing, kExperts);
    return std::vector<Tensor>{sum(dispatcher->combine(d.x, d, a[0]) * cot)};
  });
  auto wait = [](const ValueAndGrad& r) {
    for (const Tensor& t : r.grads)
      if (t.defined()) t.to_vector<float>();
  };
  const double step_ms = time_ms(iterations, *world, [&] { wait(step(args)); });
  const double exchange_ms = time_ms(iterations, *world, [&] { wait(exchange({x})); });
  if (rank == 0)
    std::printf("%-11s %5d %12.0f %10.2f %12.2f %9.1f%%\n", kind.c_str(), n,
                double(tokens) / (step_ms / 1000), step_ms, exchange_ms,
                100 * exchange_ms / step_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_dispatch_bench: %s\n", e.what());
    return 1;
  }
}
