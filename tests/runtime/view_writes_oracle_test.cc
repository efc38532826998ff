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

namespace kiln {
namespace {

const test::SafeTensors& ref() { return test::oracle_file("view_writes"); }

using Body = std::function<std::vector<Tensor>(Tensor b, const Tensor& s)>;

// The same patterns, written step by step, as gen_view_writes.py.
const std::map<std::string, Body>& patterns() {
  static const std::map<std::string, Body> p = {
      {"slice_add",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.slice(1, 1, 3);
         v.add_(s);
         return std::vector<Tensor>{b, v};
       }},
      {"select_copy_broadcast",
       [](Tensor b, const Tensor& s) {
         b.select(1, 2).copy_(s);
         return std::vector<Tensor>{b};
       }},
      {"transpose_mul_broadcast",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.transpose(0, 2);
         v.mul_(s);
         return std::vector<Tensor>{b, v};
       }},
      {"reshape_mul",
       [](Tensor b, const Tensor& s) {
         Tensor r = b.reshape({6, 4});
         r.mul_(s);
         return std::vector<Tensor>{b, r};
       }},
      {"reshape_step_fill",
       [](Tensor b, const Tensor& s) {
         b.reshape({24}).slice(0, 3, 20, 5).fill_(-1);
         return std::vector<Tensor>{b, b * s};
       }},
      {"slice_of_transpose_copy",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.transpose(1, 2).slice(1, 1, 3);
         v.copy_(s);
         return std::vector<Tensor>{b, v};
       }},
      {"view_chain_copy",
       [](Tensor b, const Tensor& s) {
         Tensor w = b.unsqueeze(0).squeeze(0).select(0, 1).t().select(0, 2);
         w.copy_(s);
         return std::vector<Tensor>{b, w};
       }},
      {"overlapping_sibling_read",
       [](Tensor b, const Tensor& s) {
         Tensor a = b.slice(1, 0, 2), c = b.slice(1, 1, 3);
         a.add_(s);
         return std::vector<Tensor>{b, a, c};
       }},
      {"write_then_another_write",
       [](Tensor b, const Tensor& s) {
         Tensor a = b.select(2, 0), c = b.slice(2, 0, 2);
         a.copy_(s);
         c.mul_(scalar(3, DType::f64));
         return std::vector<Tensor>{b, a, c};
       }},
      {"copy_from_overlapping_sibling",
       [](Tensor b, const Tensor& s) {
         Tensor t = b.transpose(1, 2);
         Tensor a = t.slice(2, 1, 3), c = t.slice(2, 0, 2);
         a.copy_(c);  // reads c as it was before the write
         return std::vector<Tensor>{b * s, a, c};
       }},
      {"base_write_then_view_read",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.select(0, 1);
         b.mul_(s);
         return std::vector<Tensor>{v, b};
       }},
      {"view_write_then_base_write",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.select(1, 2);
         v.copy_(s);
         b.add_(scalar(1, DType::f64));
         return std::vector<Tensor>{b, v};
       }},
      {"reshape_of_transpose_copies",
       [](Tensor b, const Tensor& s) {
         Tensor r = b.transpose(1, 2).reshape({2, 12});
         r.fill_(0);
         return std::vector<Tensor>{b * s, r};
       }},
      {"contiguous_of_dense_view_aliases",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.select(0, 1).contiguous();
         v.mul_(s);
         return std::vector<Tensor>{b, v};
       }},
      {"contiguous_of_strided_view_copies",
       [](Tensor b, const Tensor& s) {
         Tensor v = b.transpose(1, 2).contiguous();
         v.fill_(0);
         return std::vector<Tensor>{b * s, v};
       }},
  };
  return p;
}

enum class Mode { strict, debug, defer, compiled, grad_strict, grad_defer, grad_compiled };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::strict: return "strict";
    case Mode::debug: return "debug";
    case Mode::defer: return "defer_and_fuse";
    case Mode::compiled: return "compile";
    case Mode::grad_strict: return "value_and_grad_strict";
    case Mode::grad_defer: return "value_and_grad_defer_and_fuse";
    case Mode::grad_compiled: return "compiled_value_and_grad";
  }
  return "?";
}

bool differentiates(Mode m) { return m >= Mode::grad_strict; }
bool traced(Mode m) { return m >= Mode::compiled; }

EagerMode eager_mode_of(Mode m) {
  if (m == Mode::debug) return EagerMode::debug;
  if (m == Mode::defer || m == Mode::grad_defer) return EagerMode::defer_and_fuse;
  return EagerMode::strict;
}

struct Case {
  std::string pattern;
  Mode mode;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.pattern << " in " << mode_name(c.mode); }
void PrintTo(Mode m, std::ostream* os) { *os << mode_name(m); }

class ViewWrites : public ::testing::TestWithParam<Case> {};

void expect_close(const Tensor& kiln, const std::string& name) {
  Tensor torch = ref().get(name);
  EXPECT_EQ(kiln.shape(), torch.shape()) << name;
  EXPECT_TRUE(test::all_close(kiln.to_vector<double>(), torch.to_vector<double>(), 1e-12, 1e-12))
      << name;
}

TEST_P(ViewWrites, MatchTorch) {
  const auto& [pattern, mode] = GetParam();
  const Body& body = patterns().at(pattern);
  auto at = [&](const std::string& what) { return ref().get(pattern + "." + what); };
  std::vector<Tensor> args = {at("x"), at("s")};
  TensorFn fn = [&](const std::vector<Tensor>& a) { return body(a[0] * 1.0, a[1]); };
  size_t n = 0;
  while (ref().has(cat(pattern, ".out.", n))) ++n;
  std::vector<Tensor> cots;
  for (size_t i = 0; i < n; ++i) cots.push_back(at(cat("cot.", i)));
  TensorFn loss = [&](const std::vector<Tensor>& a) {
    std::vector<Tensor> outs = fn(a);
    Tensor l = sum(outs[0] * cots[0]);
    for (size_t i = 1; i < outs.size(); ++i) l = l + sum(outs[i] * cots[i]);
    outs.insert(outs.begin(), l);
    return outs;
  };

  EagerModeGuard eager(eager_mode_of(mode));
  std::vector<Tensor> outs, grads;
  if (mode == Mode::compiled) {
    outs = compile(fn)(args);
  } else if (!differentiates(mode)) {
    outs = fn(args);
  } else {
    TensorFn step = [&](const std::vector<Tensor>& a) {
      ValueAndGrad r = value_and_grad(loss)(a);
      r.values.erase(r.values.begin());
      r.values.insert(r.values.end(), r.grads.begin(), r.grads.end());
      return r.values;
    };
    outs = mode == Mode::grad_compiled ? compile(step)(args) : step(args);
    grads.assign(outs.end() - 2, outs.end());
    outs.resize(outs.size() - 2);
  }
  ASSERT_EQ(outs.size(), n);
  for (size_t i = 0; i < n; ++i) expect_close(outs[i], cat(pattern, ".out.", i));
  if (differentiates(mode)) {
    expect_close(grads[0], pattern + ".grad.x");
    expect_close(grads[1], pattern + ".grad.s");
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& [name, body] : patterns())
    for (Mode m : {Mode::strict, Mode::debug, Mode::defer, Mode::compiled, Mode::grad_strict,
                   Mode::grad_defer, Mode::grad_compiled})
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
