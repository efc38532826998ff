#include "tests/support/gradcheck.h"

#include <random>

#include "kiln/autograd/grad.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/recording.h"
#include "tests/support/support.h"

namespace kiln::test {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(size_t(shape.numel()));
  for (double& x : v) x = u(rng);
  return from_vector(v, shape).to(dtype);
}

::testing::AssertionResult check_gradients(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& args,
    const GradCheckOptions& options) {
  Tensor probe = fn(args);
  Tensor cot = random_tensor(probe.shape(), probe.dtype(), 1234);
  auto loss_fn = [&](const std::vector<Tensor>& a) { return sum(fn(a) * cot); };
  auto vag = value_and_grad([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{loss_fn(a)}; });
  ValueAndGrad r = vag(args);

  std::vector<size_t> wrt = options.wrt;
  if (wrt.empty())
    for (size_t i = 0; i < args.size(); ++i)
      if (is_floating(args[i].dtype())) wrt.push_back(i);

  for (size_t i : wrt) {
    std::vector<double> x = args[i].to_vector<double>();
    std::vector<double> numeric(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      auto eval = [&](double v) {
        std::vector<double> xp = x;
        xp[k] = v;
        std::vector<Tensor> a = args;
        a[i] = from_vector(xp, args[i].shape()).to(args[i].dtype());
        return loss_fn(a).item<double>();
      };
      numeric[k] = (eval(x[k] + options.eps) - eval(x[k] - options.eps)) / (2 * options.eps);
    }
    if (!r.grads[i].defined())
      return ::testing::AssertionFailure() << "no gradient returned for argument " << i;
    auto close = all_close(r.grads[i].to_vector<double>(), numeric, options.rtol, options.atol);
    if (!close) return ::testing::AssertionFailure() << "argument " << i << ": " << close.message();
  }
  return ::testing::AssertionSuccess();
}

std::shared_ptr<Recording> trace_loss_and_grads(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& args) {
  auto rec = trace(
      [&](const std::vector<Tensor>& a) {
        ValueAndGrad r = value_and_grad(fn)(a);
        std::vector<Tensor> out{r.values[0]};
        out.insert(out.end(), r.grads.begin(), r.grads.end());
        return out;
      },
      types_of(args), args.empty() ? kCPU : args[0].device());
  for (size_t i = 0; i < args.size(); ++i) rec->captured[i] = args[i];
  return rec;
}

}  // namespace kiln::test
