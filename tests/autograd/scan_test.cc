// scan against the loop it stands for: the same values and the same
// gradients bit for bit (forward and reverse, with per-iteration outputs,
// invariants and closure captures), gradients against finite differences,
// the same under compile(fn), and clear errors for malformed scans.
#include "kiln/autograd/scan.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/compile.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::random_tensor;

constexpr int64_t kSteps = 5;

// One iteration: carry h [4, 8], weight slice w [8, 8], bias b [8]
// (invariant) -> new carry, and a per-iteration output (the row sums).
std::vector<Tensor> cell(const Tensor& h, const Tensor& w, const Tensor& b) {
  Tensor next = h + tanh(matmul(h, w) + b);
  return {next, sum(next * next, {1})};
}

// The loss of the unrolled loop, and of the scan; args: h0, stacked w [L,8,8], b.
Tensor loop_loss(const std::vector<Tensor>& a, bool reverse) {
  Tensor h = a[0];
  std::vector<Tensor> ys(kSteps);
  for (int64_t s = 0; s < kSteps; ++s) {
    int64_t i = reverse ? kSteps - 1 - s : s;
    std::vector<Tensor> out = cell(h, a[1].slice(0, i, i + 1).squeeze(0), a[2]);
    h = out[0];
    ys[size_t(i)] = out[1].unsqueeze(0);
  }
  return sum(h * h) + sum(concat(ys, 0) * 0.5);
}

Tensor scan_loss(const std::vector<Tensor>& a, bool reverse) {
  ScanResult r = scan([](const std::vector<Tensor>& x) { return cell(x[0], x[1], x[2]); },
                      {a[0]}, {a[1]}, {a[2]}, reverse);
  return sum(r.carries[0] * r.carries[0]) + sum(r.ys[0] * 0.5);
}

std::vector<Tensor> args(DType dt) {
  return {random_tensor({4, 8}, dt, 1), random_tensor({kSteps, 8, 8}, dt, 2) * 0.3,
          random_tensor({8}, dt, 3)};
}

void expect_same_value_and_grads(bool reverse) {
  auto a = args(DType::f32);
  auto loop = value_and_grad([&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{loop_loss(x, reverse)};
  })(a);
  auto scanned = value_and_grad([&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{scan_loss(x, reverse)};
  })(a);
  EXPECT_EQ(loop.values[0].item<float>(), scanned.values[0].item<float>());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(loop.grads[i].to_vector<float>(), scanned.grads[i].to_vector<float>()) << "grad " << i;
}

TEST(Scan, ForwardAndGradientsEqualTheLoopBitForBit) { expect_same_value_and_grads(false); }

TEST(Scan, ReverseEqualsTheReversedLoop) { expect_same_value_and_grads(true); }

TEST(Scan, GradientsMatchFiniteDifferences) {
  EXPECT_TRUE(test::check_gradients(
      [](const std::vector<Tensor>& x) { return scan_loss(x, false); }, args(DType::f64)));
}

TEST(Scan, ClosureTensorsBecomeInvariants) {
  Tensor scale = random_tensor({8}, DType::f32, 9);
  auto a = args(DType::f32);
  ScanResult r = scan(
      [&](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{x[0] * scale + matmul(x[0], x[1])};
      },
      {a[0]}, {a[1]}, {});
  Tensor h = a[0];
  for (int64_t i = 0; i < kSteps; ++i) h = h * scale + matmul(h, a[1].slice(0, i, i + 1).squeeze(0));
  EXPECT_EQ(r.carries[0].to_vector<float>(), h.to_vector<float>());
}

TEST(Scan, CompiledEqualsEager) {
  auto a = args(DType::f32);
  auto step = [](const std::vector<Tensor>& x) {
    ValueAndGrad r = value_and_grad([](const std::vector<Tensor>& y) {
      return std::vector<Tensor>{scan_loss(y, false)};
    })(x);
    return std::vector<Tensor>{r.values[0], r.grads[0], r.grads[1], r.grads[2]};
  };
  std::vector<Tensor> eager = step(a), compiled = compile(step)(a);
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_EQ(eager[i].to_vector<float>(), compiled[i].to_vector<float>()) << i;
}

TEST(Scan, ErrorsNameTheProblem) {
  auto a = args(DType::f32);
  // A stacked input of another length.
  EXPECT_THROW(
      {
        try {
          scan([](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0]}; }, {a[0]},
               {a[1], random_tensor({kSteps + 1, 2}, DType::f32, 4)}, {});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("dim 0"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  // A body that changes its carry's shape.
  EXPECT_THROW(
      {
        try {
          scan([](const std::vector<Tensor>& x) { return std::vector<Tensor>{sum(x[0], {1})}; },
               {a[0]}, {a[1]}, {});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("carry 0"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace kiln
