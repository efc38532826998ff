#include "kiln/autograd/scan.h"

#include <map>
#include <memory>
#include <mutex>

#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/scan_body.h"

namespace kiln {
namespace {

using ir::TypeInfo;

// The op's inputs: carries, stacked xs, invariants (every graph input of the
// body after the carries and slices). Its outputs: the final carries, then
// each body result after the carries stacked along dim 0. With
// saved_carries the body's last `carries` results are its carry inputs, so
// the last ys hold every iteration's incoming carry, which the backward
// reads.
struct Counts {
  size_t carries, stacked, invariants, ys;
};

Counts counts_of(const ir::Graph& body, const ir::Attrs& a) {
  Counts c;
  c.carries = size_t(a.i("carries"));
  c.stacked = size_t(a.i("stacked"));
  KILN_CHECK(c.carries + c.stacked <= body.inputs().size() && c.carries <= body.outputs().size(),
             "scan: the body takes ", body.inputs().size(), " inputs and returns ",
             body.outputs().size(), " results, fewer than the ", c.carries, " carries and ",
             c.stacked, " stacked inputs declared");
  c.invariants = body.inputs().size() - c.carries - c.stacked;
  c.ys = body.outputs().size() - c.carries;
  return c;
}

Shape without_first(const Shape& s) {
  Shape out = s;
  out.erase(0);
  return out;
}

Shape with_first(int64_t n, const Shape& s) {
  Shape out = s;
  out.insert(0, n);
  return out;
}

std::vector<TypeInfo> infer_scan(std::span<const TypeInfo> in, const ir::Attrs& a) {
  std::shared_ptr<const ir::Graph> body = scan_body_graph(a.s("body"));
  Counts n = counts_of(*body, a);
  const int64_t length = a.i("length");
  KILN_CHECK(in.size() == body->inputs().size(), "scan: ", in.size(), " inputs for a body of ",
             body->inputs().size());
  for (size_t i = 0; i < in.size(); ++i) {
    TypeInfo want = body->type(body->inputs()[i]);
    TypeInfo got = in[i];
    if (i >= n.carries && i < n.carries + n.stacked) {
      KILN_CHECK(got.shape.size() >= 1 && got.shape[0] == length, "scan: stacked input ",
                 i - n.carries, " is ", ir::to_string(got), "; its dim 0 must be the length ",
                 length);
      got.shape = without_first(got.shape);
    }
    KILN_CHECK(got == want, "scan: input ", i, " is ", ir::to_string(in[i]),
               " but the body takes ", ir::to_string(want));
  }
  std::vector<TypeInfo> out;
  for (size_t i = 0; i < body->outputs().size(); ++i) {
    TypeInfo t = body->type(body->outputs()[i]);
    if (i < n.carries) {
      KILN_CHECK(t == in[i], "scan: the body returns carry ", i, " as ", ir::to_string(t),
                 " but it enters as ", ir::to_string(in[i]));
    } else {
      t.shape = with_first(length, t.shape);
    }
    out.push_back(t);
  }
  return out;
}

ScanResult scan_op(const TensorFn& body, const std::vector<Tensor>& carries,
                   const std::vector<Tensor>& xs, const std::vector<Tensor>& invariants,
                   bool reverse, bool save_carries);

// The backward of a scan: a scan in the other direction whose body
// recomputes one forward iteration and applies its vector-Jacobian product,
// carrying the carries' cotangents and the invariants' summed gradients.
void scan_vjp(VjpCall& c) {
  KILN_CHECK(c.attrs.b("saved_carries"),
             "scan: this scan keeps no per-iteration carries (a scan's own backward), so it "
             "cannot be differentiated again");
  std::shared_ptr<const ir::Graph> body = scan_body_graph(c.attrs.s("body"));
  const Counts n = counts_of(*body, c.attrs);
  const size_t user_ys = n.ys - n.carries;
  for (size_t i = 0; i < n.carries; ++i)
    KILN_CHECK(is_floating(c.inputs[i].dtype()), "scan: carry ", i, " is ",
               dtype_name(c.inputs[i].dtype()), "; only floating carries can be differentiated");
  // The stacked inputs and invariants whose gradients are wanted (floating
  // ones only), and the outputs with cotangents.
  std::vector<size_t> float_xs, float_inv, seeded_ys;
  for (size_t k = 0; k < n.stacked; ++k)
    if (is_floating(c.inputs[n.carries + k].dtype()) && c.wants(n.carries + k)) float_xs.push_back(k);
  for (size_t k = 0; k < n.invariants; ++k)
    if (is_floating(c.inputs[n.carries + n.stacked + k].dtype()) && c.wants(n.carries + n.stacked + k))
      float_inv.push_back(k);
  for (size_t j = 0; j < user_ys; ++j)
    if (c.cotangents[n.carries + j].defined()) seeded_ys.push_back(j);

  // Backward body arguments: carries (d carry, summed d invariants), stacked
  // (the iteration's carry, its x slices, its y cotangents), invariants.
  auto backward_body = [&, body](const std::vector<Tensor>& a) {
    auto& trace = dynamic_cast<TraceContext&>(current_context());
    size_t at = 0;
    auto take = [&](size_t count) {
      std::vector<Tensor> v(a.begin() + long(at), a.begin() + long(at + count));
      at += count;
      return v;
    };
    std::vector<Tensor> d_carry = take(n.carries), d_inv_sum = take(float_inv.size());
    std::vector<Tensor> forward_in = take(n.carries);
    std::vector<Tensor> x = take(n.stacked), dy = take(seeded_ys.size()), inv = take(n.invariants);
    forward_in.insert(forward_in.end(), x.begin(), x.end());
    forward_in.insert(forward_in.end(), inv.begin(), inv.end());
    std::vector<Tensor> outs = run_graph(*body, forward_in, "scan body (recomputed)");
    std::vector<Tensor> cots(outs.size());
    for (size_t i = 0; i < n.carries; ++i) cots[i] = d_carry[i];
    for (size_t k = 0; k < seeded_ys.size(); ++k) cots[n.carries + seeded_ys[k]] = dy[k];
    // Differentiated: the carries, then the wanted x slices and invariants.
    std::vector<Tensor> wrt(forward_in.begin(), forward_in.begin() + long(n.carries));
    for (size_t k : float_xs) wrt.push_back(x[k]);
    for (size_t k : float_inv) wrt.push_back(inv[k]);
    std::vector<Tensor> g = append_vjp(*trace.recording(), outs, cots, wrt);
    std::vector<Tensor> result(g.begin(), g.begin() + long(n.carries));
    for (size_t k = 0; k < float_inv.size(); ++k)
      result.push_back(d_inv_sum[k] + g[n.carries + float_xs.size() + k]);
    for (size_t k = 0; k < float_xs.size(); ++k) result.push_back(g[n.carries + k]);
    return result;
  };

  std::vector<Tensor> carries, xs, invariants;
  for (size_t i = 0; i < n.carries; ++i) carries.push_back(c.cot(i));
  for (size_t k : float_inv) carries.push_back(zeros_like(c.inputs[n.carries + n.stacked + k]));
  for (size_t i = 0; i < n.carries; ++i) xs.push_back(c.outputs[n.carries + user_ys + i]);
  for (size_t k = 0; k < n.stacked; ++k) xs.push_back(c.inputs[n.carries + k]);
  for (size_t j : seeded_ys) xs.push_back(c.cotangents[n.carries + j]);
  for (size_t k = 0; k < n.invariants; ++k) invariants.push_back(c.inputs[n.carries + n.stacked + k]);
  ScanResult r = scan_op(backward_body, carries, xs, invariants, !c.attrs.b("reverse"), false);

  for (size_t i = 0; i < n.carries; ++i) c.grads[i] = r.carries[i];
  for (size_t k = 0; k < float_inv.size(); ++k)
    c.grads[n.carries + n.stacked + float_inv[k]] = r.carries[n.carries + k];
  for (size_t k = 0; k < float_xs.size(); ++k) c.grads[n.carries + float_xs[k]] = r.ys[k];
}

const ir::OpDef& kScan = ops::declare({
    .name = "scan",
    .num_inputs = -1,
    .attrs = {{"body", ir::AttrKind::string, std::nullopt},
              {"carries", ir::AttrKind::int_, std::nullopt},
              {"stacked", ir::AttrKind::int_, std::nullopt},
              {"length", ir::AttrKind::int_, std::nullopt},
              {"reverse", ir::AttrKind::bool_, false},
              {"saved_carries", ir::AttrKind::bool_, false},
              // Outputs from this one on live in the offload pool (-1: none):
              // activation offload's saved carries (compiler/offload.h).
              {"offload_from", ir::AttrKind::int_, int64_t(-1)},
              // Stacked inputs (by position among them) in the offload pool.
              {"offloaded_stacked", ir::AttrKind::ints, ir::IntList{}}},
    .infer = infer_scan,
    .fusion = ir::FusionClass::opaque,
    .vjp = scan_vjp,
    .offloaded_output = [](const ir::Attrs& a, size_t k) {
      return a.i("offload_from") >= 0 && int64_t(k) >= a.i("offload_from");
    },
});

ScanResult scan_op(const TensorFn& body, const std::vector<Tensor>& carries,
                   const std::vector<Tensor>& xs, const std::vector<Tensor>& invariants,
                   bool reverse, bool save_carries) {
  KILN_CHECK(!xs.empty(), "scan: give at least one stacked input (it sets the length)");
  const int64_t length = xs[0].rank() >= 1 ? xs[0].dim(0) : -1;
  std::vector<TypeInfo> types = types_of(carries);
  for (size_t k = 0; k < xs.size(); ++k) {
    KILN_CHECK(xs[k].rank() >= 1 && xs[k].dim(0) == length, "scan: stacked input ", k, " is ",
               ir::to_string(xs[k].type()), "; every stacked input needs dim 0 = ", length);
    types.push_back({xs[k].dtype(), without_first(xs[k].shape())});
  }
  for (const Tensor& t : invariants) types.push_back(t.type());
  const size_t num_carries = carries.size();
  auto traced = trace(
      [&](const std::vector<Tensor>& a) {
        std::vector<Tensor> out = body(a);
        KILN_CHECK(out.size() >= num_carries, "scan: the body returned ", out.size(),
                   " results, fewer than its ", num_carries, " carries");
        if (save_carries) out.insert(out.end(), a.begin(), a.begin() + long(num_carries));
        return out;
      },
      types, xs[0].device());
  std::vector<Tensor> inputs = carries;
  inputs.insert(inputs.end(), xs.begin(), xs.end());
  inputs.insert(inputs.end(), invariants.begin(), invariants.end());
  // Tensors the body read from its closure: more invariants.
  inputs.insert(inputs.end(), traced->captured.begin() + long(types.size()), traced->captured.end());
  std::vector<Tensor> out = apply(kScan, inputs,
                                  {{"body", ir::to_text(traced->graph)},
                                   {"carries", int64_t(num_carries)},
                                   {"stacked", int64_t(xs.size())},
                                   {"length", length},
                                   {"reverse", reverse},
                                   {"saved_carries", save_carries}});
  ScanResult r;
  r.carries.assign(out.begin(), out.begin() + long(num_carries));
  r.ys.assign(out.begin() + long(num_carries), out.end() - long(save_carries ? num_carries : 0));
  return r;
}

}  // namespace

ScanResult scan(const TensorFn& body, const std::vector<Tensor>& carries,
                const std::vector<Tensor>& xs, const std::vector<Tensor>& invariants,
                bool reverse) {
  // Only a traced scan can be differentiated (value_and_grad traces): one
  // run eagerly, as in validation, keeps no per-iteration carries.
  const bool traced = dynamic_cast<TraceContext*>(&current_context()) != nullptr;
  return scan_op(body, carries, xs, invariants, reverse, traced);
}

}  // namespace kiln
