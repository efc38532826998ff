// `kiln demo`: trains a tiny character-level model with kiln's autograd and
// Adam written in tensor ops, printing the loss as it falls. A smoke test of
// the runtime a user can run before the trainer exists.
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string_view>

#include "apps/kiln/commands.h"
#include "kiln/kiln.h"

namespace kiln::cli {
namespace {

// The opening of Pride and Prejudice (public domain).
constexpr std::string_view kText =
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife. However little known the feelings or views of such "
    "a man may be on his first entering a neighbourhood, this truth is so well fixed in the "
    "minds of the surrounding families, that he is considered the rightful property of some "
    "one or other of their daughters.";

constexpr int64_t kContext = 4, kVocab = 256, kEmbed = 16, kHidden = 64;

struct Adam {
  double lr = 1e-2, b1 = 0.9, b2 = 0.99, eps = 1e-8;
  std::vector<Tensor> m, v;
  int step = 0;
  void update(std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
    if (m.empty())
      for (const Tensor& p : params) m.push_back(zeros_like(p)), v.push_back(zeros_like(p));
    ++step;
    double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
    for (size_t i = 0; i < params.size(); ++i) {
      m[i] = m[i] * b1 + grads[i] * (1 - b1);
      v[i] = v[i] * b2 + square(grads[i]) * (1 - b2);
      params[i] = params[i] - (m[i] / c1) / (sqrt(v[i] / c2) + eps) * lr;
    }
  }
};

void run_demo(int steps) {
  // Every window of kContext bytes predicts the byte after it.
  std::vector<int64_t> context, target;
  for (size_t i = kContext; i < kText.size(); ++i) {
    for (int64_t k = kContext; k > 0; --k) context.push_back(static_cast<unsigned char>(kText[i - k]));
    target.push_back(static_cast<unsigned char>(kText[i]));
  }
  int64_t n = int64_t(target.size());
  Tensor ctx = from_vector(context, {n, kContext}), tgt = from_vector(target, {n});

  Generator g(0);
  std::vector<Tensor> params = {
      randn({kVocab, kEmbed}, g) * 0.1,
      randn({kHidden, kContext * kEmbed}, g) * (1.0 / std::sqrt(double(kContext * kEmbed))),
      randn({kVocab, kHidden}, g) * (1.0 / std::sqrt(double(kHidden))),
  };
  auto loss_and_grads = value_and_grad([&](const std::vector<Tensor>& p) {
    Tensor x = embedding(p[0], ctx).reshape({n, kContext * kEmbed});
    Tensor h = silu(matmul(x, p[1], false, true));
    return std::vector<Tensor>{cross_entropy(matmul(h, p[2], false, true), tgt)};
  });

  std::cout << "kiln demo: a " << kContext << "-byte-context MLP on " << n << " characters, "
            << eager_mode_name(eager_mode()) << " eager mode, " << num_threads() << " threads\n";
  Adam adam;
  auto start = std::chrono::steady_clock::now();
  double first = 0, last = 0;
  for (int step = 0; step <= steps; ++step) {
    ValueAndGrad r = loss_and_grads(params);
    last = r.values[0].item<double>();
    if (step == 0) first = last;
    if (step % 25 == 0 || step == steps)
      std::cout << "step " << std::setw(4) << step << "  loss " << std::fixed << std::setprecision(4)
                << last << "\n";
    if (step < steps) adam.update(params, r.grads);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "loss fell from " << first << " to " << last << " in " << steps << " steps ("
            << std::setprecision(2) << seconds << " s)\n";
  KILN_CHECK(last < first, "the demo's loss did not fall: kiln is broken on this machine");
}

}  // namespace

void add_demo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Train a tiny character model (a smoke test of the runtime)");
  auto steps = std::make_shared<int>(200);
  cmd->add_option("--steps", *steps, "optimizer steps")->check(kPositiveCount);
  cmd->callback([steps] { run_demo(*steps); });
}

}  // namespace kiln::cli
