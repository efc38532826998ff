#include "tests/support/view_writes.h"

#include "kiln/autograd/grad.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"

namespace kiln::test {

const std::map<std::string, ViewWriteBody>& view_write_patterns() {
  static const std::map<std::string, ViewWriteBody> p = {
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

const char* mode_name(WriteMode m) {
  switch (m) {
    case WriteMode::strict: return "strict";
    case WriteMode::debug: return "debug";
    case WriteMode::defer: return "defer_and_fuse";
    case WriteMode::compiled: return "compile";
    case WriteMode::grad_strict: return "value_and_grad_strict";
    case WriteMode::grad_defer: return "value_and_grad_defer_and_fuse";
    case WriteMode::grad_compiled: return "compiled_value_and_grad";
  }
  return "?";
}

void PrintTo(WriteMode m, std::ostream* os) { *os << mode_name(m); }

bool differentiates(WriteMode m) { return m >= WriteMode::grad_strict; }
bool traced(WriteMode m) { return m >= WriteMode::compiled; }

EagerMode eager_mode_of(WriteMode m) {
  if (m == WriteMode::debug) return EagerMode::debug;
  if (m == WriteMode::defer || m == WriteMode::grad_defer) return EagerMode::defer_and_fuse;
  return EagerMode::strict;
}

ViewWriteRun run_view_write(const ViewWriteBody& body, WriteMode mode,
                            const std::vector<Tensor>& args, const std::vector<Tensor>& cots) {
  TensorFn fn = [&](const std::vector<Tensor>& a) { return body(a[0] * 1.0, a[1]); };
  TensorFn loss = [&](const std::vector<Tensor>& a) {
    std::vector<Tensor> outs = fn(a);
    Tensor l = sum(outs[0] * cots[0]);
    for (size_t i = 1; i < outs.size(); ++i) l = l + sum(outs[i] * cots[i]);
    outs.insert(outs.begin(), l);
    return outs;
  };

  EagerModeGuard eager(eager_mode_of(mode));
  std::vector<Tensor> outs, grads;
  if (mode == WriteMode::compiled) {
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
    outs = mode == WriteMode::grad_compiled ? compile(step)(args) : step(args);
    grads.assign(outs.end() - 2, outs.end());
    outs.resize(outs.size() - 2);
  }
  return {outs, grads};
}

}  // namespace kiln::test
