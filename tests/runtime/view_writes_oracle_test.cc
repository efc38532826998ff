// In-place writes through views in every mode against PyTorch: each pattern
// of tests/oracle/gen_view_writes.py runs eagerly (strict, debug,
// defer_and_fuse), compiled, and under value_and_grad (strict, defer_and_fuse,
// compiled), where the gradients flow through the writes.
#include <gtest/gtest.h>

#include <map>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "tests/support/oracle.h"
#include "tests/support/support.h"
#include "tests/support/view_writes.h"

namespace kiln {
namespace {

const test::SafeTensors& ref() { return test::oracle_file("view_writes"); }

using Mode = test::WriteMode;
using test::differentiates;
using test::eager_mode_of;
using test::mode_name;
using test::traced;

struct Case {
  std::string pattern;
  Mode mode;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.pattern << " in " << mode_name(c.mode); }

class ViewWrites : public ::testing::TestWithParam<Case> {};

void expect_close(const Tensor& kiln, const std::string& name) {
  Tensor torch = ref().get(name);
  EXPECT_EQ(kiln.shape(), torch.shape()) << name;
  EXPECT_TRUE(test::all_close(kiln.to_vector<double>(), torch.to_vector<double>(), 1e-12, 1e-12))
      << name;
}

TEST_P(ViewWrites, MatchTorch) {
  const auto& [pattern, mode] = GetParam();
  const test::ViewWriteBody& body = test::view_write_patterns().at(pattern);
  auto at = [&](const std::string& what) { return ref().get(pattern + "." + what); };
  std::vector<Tensor> args = {at("x"), at("s")};
  size_t n = 0;
  while (ref().has(cat(pattern, ".out.", n))) ++n;
  std::vector<Tensor> cots;
  for (size_t i = 0; i < n; ++i) cots.push_back(at(cat("cot.", i)));
  auto [outs, grads] = test::run_view_write(body, mode, args, cots);
  ASSERT_EQ(outs.size(), n);
  for (size_t i = 0; i < n; ++i) expect_close(outs[i], cat(pattern, ".out.", i));
  if (differentiates(mode)) {
    expect_close(grads[0], pattern + ".grad.x");
    expect_close(grads[1], pattern + ".grad.s");
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& [name, body] : test::view_write_patterns())
    for (Mode m : test::kAllWriteModes)
      cases.push_back({name, m});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllModes, ViewWrites, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.pattern + "_" + mode_name(info.param.mode);
                         });

// Writes that cannot be supported raise, in every mode, instead of being dropped.
class UnsupportedViewWrites : public ::testing::TestWithParam<Mode> {
 protected:
  // Runs `fn` on `args` the way this test's mode does.
  void run(const TensorFn& fn, const std::vector<Tensor>& args) {
    EagerModeGuard eager(eager_mode_of(GetParam()));
    switch (GetParam()) {
      case Mode::compiled: compile(fn)(args); break;
      case Mode::grad_strict:
      case Mode::grad_defer:
        value_and_grad([&](const std::vector<Tensor>& a) {
          std::vector<Tensor> r = fn(a);
          return std::vector<Tensor>{sum(r[0])};
        })(args);
        break;
      default: fn(args)[0].to_vector<double>();
    }
  }
};

TEST_P(UnsupportedViewWrites, WriteThroughExpandRaises) {
  test::expect_error(
      [&] {
        run(
            [](const std::vector<Tensor>& a) {
              Tensor b = a[0] * 1.0;
              b.select(0, 0).slice(0, 0, 1).expand({3, 4}).fill_(1);
              return std::vector<Tensor>{b};
            },
            {full({2, 3, 4}, 2, DType::f64)});
      },
      "expand");
}

TEST_P(UnsupportedViewWrites, WriteIntoAnArgumentRaisesWhenTraced) {
  if (!traced(GetParam())) GTEST_SKIP() << "eager writes into arguments are ordinary writes";
  test::expect_error(
      [&] {
        run(
            [](const std::vector<Tensor>& a) {
              a[0].slice(0, 0, 1).fill_(1);
              return std::vector<Tensor>{a[0] * 1.0};
            },
            {full({2, 3}, 2, DType::f64)});
      },
      "targets one of its arguments");
}

TEST_P(UnsupportedViewWrites, WriteIntoACapturedTensorRaisesWhenTraced) {
  if (!traced(GetParam())) GTEST_SKIP() << "eager writes into captured tensors are ordinary writes";
  Tensor outside = full({2, 3}, 2, DType::f64);
  test::expect_error(
      [&] {
        run(
            [&](const std::vector<Tensor>& a) {
              outside.select(1, 0).copy_(a[0]);
              return std::vector<Tensor>{a[0] * 1.0};
            },
            {full({2}, 1, DType::f64)});
      },
      "(through a view) targets a tensor created outside it");
  EXPECT_EQ(outside.to_vector<double>(), std::vector<double>(6, 2));
}

INSTANTIATE_TEST_SUITE_P(AllModes, UnsupportedViewWrites,
                         ::testing::Values(Mode::strict, Mode::debug, Mode::defer, Mode::compiled,
                                           Mode::grad_strict, Mode::grad_defer),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return std::string(mode_name(info.param));
                         });

}  // namespace
}  // namespace kiln
