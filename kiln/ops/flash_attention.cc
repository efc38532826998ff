// The flash_attention op and its backward op: declarations, composites (the
// masked score matrix built from the basic ops) and the vjp rule.
#include <cmath>
#include <limits>

#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace ops {
namespace {

struct FlashDims {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
  int64_t group() const { return q_heads / kv_heads; }
};

std::string types(std::span<const TypeInfo> in) {
  std::string s;
  for (const TypeInfo& t : in) s += (s.empty() ? "" : ", ") + ir::to_string(t);
  return s;
}

// Checks q, k, v and the optional doc_ids (input `doc`, -1 for none) of
// either op; `op` names it in errors.
FlashDims flash_dims(const char* op, std::span<const TypeInfo> in, int doc, const Attrs& a) {
  const TypeInfo &q = in[0], &k = in[1], &v = in[2];
  KILN_CHECK(q.shape.size() == 4 && k.shape.size() == 4 && v.shape.size() == 4, op,
             ": q, k and v must be [batch, heads, seq, head_dim], got ", types(in));
  KILN_CHECK(is_floating(q.dtype) && k.dtype == q.dtype && v.dtype == q.dtype, op,
             ": q, k and v must share one floating dtype, got ", types(in));
  FlashDims d{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
  KILN_CHECK(k.shape[0] == d.batch && k.shape[3] == d.head_dim && v.shape[0] == d.batch &&
                 v.shape[1] == d.kv_heads && v.shape[2] == d.kv_len,
             op, ": k must be [", d.batch, ", kv_heads, kv_len, ", d.head_dim, "] and v [",
             d.batch, ", kv_heads, kv_len, v_dim] with k's kv_heads and kv_len; got ", types(in));
  KILN_CHECK(d.kv_heads > 0 && d.q_heads % d.kv_heads == 0, op, ": q has ", d.q_heads,
             " heads, not a multiple of k's ", d.kv_heads,
             " (grouped-query attention needs q_heads = group * kv_heads)");
  bool causal = a.b("causal");
  int64_t window = a.i("sliding_window");
  KILN_CHECK(!causal || d.q_len <= d.kv_len, op,
             ": causal attention needs q_len <= kv_len (queries are the last positions), got "
             "q_len ", d.q_len, " and kv_len ", d.kv_len);
  KILN_CHECK(window >= 0 && (window == 0 || causal), op, ": sliding_window ", window,
             " must be 0 (none) or positive with causal=true");
  KILN_CHECK(a.f("scale") > 0, op, ": scale ", a.f("scale"), " must be positive");
  if (doc >= 0) {
    const TypeInfo& ids = in[size_t(doc)];
    KILN_CHECK(is_integer(ids.dtype) && (ids.shape == Shape{d.batch, d.q_len}) && d.q_len == d.kv_len,
               op, ": doc_ids must be an i32 or i64 [batch, seq] tensor for q_len == kv_len; got ",
               ir::to_string(ids), " for q ", ir::to_string(q), " and k ", ir::to_string(k));
  }
  return d;
}

// Query i may attend key j (bool, broadcasting to [B, Hkv, G, Sq, Sk]);
// undefined when every pair may.
Tensor attention_mask(const FlashDims& d, const Attrs& a, const Tensor& doc_ids, Device device) {
  Tensor mask;
  if (a.b("causal")) {
    // Queries are the last Sq of the Sk positions.
    Tensor q_pos = arange(double(d.kv_len - d.q_len), double(d.kv_len), 1, DType::i64, device)
                       .unsqueeze(-1);
    Tensor k_pos = arange(0, double(d.kv_len), 1, DType::i64, device);
    mask = le(k_pos, q_pos);
    if (int64_t w = a.i("sliding_window"); w > 0)
      mask = logical_and(mask, gt(k_pos, q_pos - double(w)));
  }
  if (doc_ids.defined()) {
    Tensor same = eq(doc_ids.unsqueeze(-1), doc_ids.unsqueeze(-2)).unsqueeze(1).unsqueeze(1);
    mask = mask.defined() ? logical_and(same, mask) : same;
  }
  return mask;
}

// Scaled, masked scores [B, Hkv, G, Sq, Sk] in the compute dtype. Masked
// entries hold the lowest finite value, whose exp underflows to 0.
Tensor masked_scores(const Tensor& q, const Tensor& k, const FlashDims& d, const Attrs& a,
                     const Tensor& doc_ids) {
  DType cd = compute_dtype(q.dtype());
  Tensor qg = q.to(cd).reshape({d.batch, d.kv_heads, d.group(), d.q_len, d.head_dim});
  Tensor s = matmul(qg, k.to(cd).unsqueeze(2), false, true) * a.f("scale");
  Tensor mask = attention_mask(d, a, doc_ids, q.device());
  if (!mask.defined()) return s;
  double lowest = cd == DType::f64 ? std::numeric_limits<double>::lowest()
                                   : double(std::numeric_limits<float>::lowest());
  return where(mask, s, scalar(lowest, cd, q.device()));
}

std::vector<TypeInfo> types_of(std::span<const Tensor> ts) {
  std::vector<TypeInfo> t;
  for (const Tensor& x : ts) t.push_back(x.type());
  return t;
}

const std::vector<ir::AttrSpec> kAttrs = {{"causal", AttrKind::bool_, false},
                                          {"scale", AttrKind::float_, std::nullopt},
                                          {"sliding_window", AttrKind::int_, int64_t{0}}};

// Score and product flops; a causal mask lets the kernels skip about half.
double attention_flops(const FlashDims& d, const Attrs& a) {
  double f = 2.0 * double(d.batch * d.q_heads * d.q_len * d.kv_len) * double(d.head_dim + d.v_dim);
  return a.b("causal") ? f / 2 : f;
}

ir::Cost io_cost(std::span<const TypeInfo> in, std::span<const TypeInfo> out, double flops) {
  ir::Cost c{flops, 0};
  for (auto list : {in, out})
    for (const TypeInfo& t : list) c.bytes += double(t.shape.numel()) * double(itemsize(t.dtype));
  return c;
}

// Inputs: q, k, v, dout, lse, delta [, doc_ids]; delta = rowsum(dout * out)
// minus the cotangent of lse. Outputs dq, dk, dv.
const OpDef& kFlashBackward = declare({
    .name = "flash_attention_backward",
    .num_inputs = -1,
    .attrs = kAttrs,
    .infer = [](auto in, const Attrs& a) {
      const char* op = "flash_attention_backward";
      KILN_CHECK(in.size() == 6 || in.size() == 7, op,
                 ": takes q, k, v, dout, lse, delta and optionally doc_ids; got ", in.size(),
                 " inputs");
      FlashDims d = flash_dims(op, in, in.size() == 7 ? 6 : -1, a);
      TypeInfo dout{in[0].dtype, Shape{d.batch, d.q_heads, d.q_len, d.v_dim}};
      TypeInfo row{compute_dtype(in[0].dtype), Shape{d.batch, d.q_heads, d.q_len}};
      KILN_CHECK(in[3] == dout && in[4] == row && in[5] == row, op, ": dout must be ",
                 ir::to_string(dout), " and lse and delta ", ir::to_string(row), "; got ",
                 types(in));
      return std::vector<TypeInfo>{in[0], in[1], in[2]};
    },
    .cost = [](auto in, auto out, const Attrs& a) {
      // Scores twice (once per pass), then dV, dP, dK and dQ.
      FlashDims d = flash_dims("flash_attention_backward", in, in.size() == 7 ? 6 : -1, a);
      return io_cost(in, out, 2.5 * attention_flops(d, a));
    },
    .composite = [](CompositeCall& c) {
      const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
      const Tensor &dout = c.inputs[3], &lse = c.inputs[4], &delta = c.inputs[5];
      Tensor doc_ids = c.inputs.size() == 7 ? c.inputs[6] : Tensor();
      std::vector<TypeInfo> t = types_of(c.inputs);
      FlashDims d = flash_dims("flash_attention_backward", t, doc_ids.defined() ? 6 : -1, c.attrs);
      DType cd = compute_dtype(q.dtype());
      Shape rows{d.batch, d.kv_heads, d.group(), d.q_len, 1};
      Tensor p = exp(masked_scores(q, k, d, c.attrs, doc_ids) - lse.reshape(rows));
      Tensor dog = dout.to(cd).reshape({d.batch, d.kv_heads, d.group(), d.q_len, d.v_dim});
      Tensor dv = sum(matmul(p, dog, true, false), {2});
      Tensor ds = p * (matmul(dog, v.to(cd).unsqueeze(2), false, true) - delta.reshape(rows));
      double scale = c.attrs.f("scale");
      Tensor qg = q.to(cd).reshape({d.batch, d.kv_heads, d.group(), d.q_len, d.head_dim});
      Tensor dq = matmul(ds, k.to(cd).unsqueeze(2)) * scale;
      Tensor dk = sum(matmul(ds, qg, true, false), {2}) * scale;
      c.outputs = {dq.reshape(q.shape()).to(q.dtype()), dk.to(k.dtype()), dv.to(v.dtype())};
    },
});

const OpDef& kFlash = declare({
    .name = "flash_attention",
    .num_inputs = -1,
    .attrs = kAttrs,
    .infer = [](auto in, const Attrs& a) {
      KILN_CHECK(in.size() == 3 || in.size() == 4,
                 "flash_attention: takes q, k, v and optionally doc_ids; got ", in.size(),
                 " inputs");
      FlashDims d = flash_dims("flash_attention", in, in.size() == 4 ? 3 : -1, a);
      return std::vector<TypeInfo>{
          {in[0].dtype, Shape{d.batch, d.q_heads, d.q_len, d.v_dim}},
          {compute_dtype(in[0].dtype), Shape{d.batch, d.q_heads, d.q_len}}};
    },
    .cost = [](auto in, auto out, const Attrs& a) {
      FlashDims d = flash_dims("flash_attention", in, in.size() == 4 ? 3 : -1, a);
      return io_cost(in, out, attention_flops(d, a));
    },
    .vjp = [](VjpCall& c) {
      const Tensor &out = c.outputs[0], &lse = c.outputs[1];
      DType cd = compute_dtype(out.dtype());
      Tensor dout = c.cot(0);
      Tensor delta = sum(dout.to(cd) * out.to(cd), {-1});
      if (c.cotangents[1].defined()) delta = delta - c.cotangents[1];
      std::vector<Tensor> in{c.inputs[0], c.inputs[1], c.inputs[2], dout, lse, delta};
      if (c.inputs.size() == 4) in.push_back(c.inputs[3]);
      std::vector<Tensor> g = kiln::apply(kFlashBackward, in, c.attrs);
      for (size_t i = 0; i < 3; ++i) c.grads[i] = g[i];
    },
    .composite = [](CompositeCall& c) {
      const Tensor &q = c.inputs[0], &v = c.inputs[2];
      Tensor doc_ids = c.inputs.size() == 4 ? c.inputs[3] : Tensor();
      std::vector<TypeInfo> t = types_of(c.inputs);
      FlashDims d = flash_dims("flash_attention", t, doc_ids.defined() ? 3 : -1, c.attrs);
      Tensor s = masked_scores(q, c.inputs[1], d, c.attrs, doc_ids);
      Tensor lse = logsumexp(s, {-1}, true);
      // The probabilities round to v's dtype for the product, as flash-attention does.
      Tensor out = matmul(exp(s - lse).to(v.dtype()), v.unsqueeze(2));
      c.outputs = {out.reshape({d.batch, d.q_heads, d.q_len, d.v_dim}),
                   lse.reshape({d.batch, d.q_heads, d.q_len})};
    },
});

}  // namespace
}  // namespace ops

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, const Tensor& doc_ids) {
  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(q.dim(-1)));
  std::vector<Tensor> in{q, k, v};
  if (doc_ids.defined()) in.push_back(doc_ids);
  return kiln::apply(ops::kFlash, in,
               {{"causal", options.causal},
                {"scale", scale},
                {"sliding_window", options.sliding_window}})[0];
}

}  // namespace kiln
