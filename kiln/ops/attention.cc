// The scaled_dot_product_attention op: declaration and composite.
#include <array>
#include <cmath>
#include <limits>

#include "kiln/ops/attention.h"
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace ops {
namespace {

struct AttentionDims {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
};

AttentionDims attention_dims(std::span<const TypeInfo> in, const Attrs& a) {
  const TypeInfo &q = in[0], &k = in[1], &v = in[2];
  KILN_CHECK(q.shape.size() == 4 && k.shape.size() == 4 && v.shape.size() == 4,
             "scaled_dot_product_attention: q, k and v must be [batch, heads, seq, head_dim], got ",
             ir::to_string(q), ", ", ir::to_string(k), " and ", ir::to_string(v));
  KILN_CHECK(is_floating(q.dtype) && k.dtype == q.dtype && v.dtype == q.dtype,
             "scaled_dot_product_attention: q, k and v must share one floating dtype, got ",
             ir::to_string(q), ", ", ir::to_string(k), " and ", ir::to_string(v));
  AttentionDims d{q.shape[0], q.shape[1], k.shape[1], q.shape[2],
                  k.shape[2], q.shape[3], v.shape[3]};
  KILN_CHECK(k.shape[0] == d.batch && k.shape[3] == d.head_dim && v.shape[0] == d.batch &&
                 v.shape[1] == d.kv_heads && v.shape[2] == d.kv_len,
             "scaled_dot_product_attention: k must be [", d.batch, ", kv_heads, kv_len, ",
             d.head_dim, "] and v [", d.batch,
             ", kv_heads, kv_len, v_dim] with k's kv_heads and "
             "kv_len, for q ",
             ir::to_string(q), "; got k ", ir::to_string(k), " and v ", ir::to_string(v));
  KILN_CHECK(d.kv_heads > 0 && d.q_heads % d.kv_heads == 0, "scaled_dot_product_attention: q has ",
             d.q_heads, " heads, not a multiple of k's ", d.kv_heads,
             " (grouped-query attention "
             "needs q_heads = group * kv_heads)");
  bool causal = a.b("causal");
  int64_t window = a.i("sliding_window");
  KILN_CHECK(!causal || d.q_len <= d.kv_len,
             "scaled_dot_product_attention: causal attention "
             "needs q_len <= kv_len (queries are the last positions), got q_len ",
             d.q_len, " and kv_len ", d.kv_len);
  KILN_CHECK(window >= 0 && (window == 0 || causal),
             "scaled_dot_product_attention: "
             "sliding_window ",
             window, " must be 0 (none) or positive with causal=true");
  KILN_CHECK(a.f("scale") > 0, "scaled_dot_product_attention: scale ", a.f("scale"),
             " must be positive");
  return d;
}

// True where query i (row) may attend key j (column): [q_len, kv_len].
Tensor causal_mask(int64_t q_len, int64_t kv_len, int64_t window, Device device) {
  Tensor q_pos =
      arange(double(kv_len - q_len), double(kv_len), 1, DType::i64, device).unsqueeze(-1);
  Tensor k_pos = arange(0, double(kv_len), 1, DType::i64, device);
  Tensor allowed = le(k_pos, q_pos);
  if (window > 0) allowed = logical_and(allowed, gt(k_pos, q_pos - double(window)));
  return allowed;
}

double lowest(DType t) {
  return t == DType::f64 ? std::numeric_limits<double>::lowest()
                         : double(std::numeric_limits<float>::lowest());
}

const OpDef& kAttention = declare({
    .name = "scaled_dot_product_attention",
    .num_inputs = 3,
    .attrs = {{"causal", AttrKind::bool_, false},
              {"scale", AttrKind::float_, std::nullopt},
              {"sliding_window", AttrKind::int_, int64_t{0}}},
    .infer = [](auto in, const Attrs& a) {
      AttentionDims d = attention_dims(in, a);
      return std::vector<TypeInfo>{{in[0].dtype, Shape{d.batch, d.q_heads, d.q_len, d.v_dim}}};
    },
    .cost = [](auto in, auto out, const Attrs& a) {
      // Both products in full; a causal mask skips about half in a fused kernel.
      AttentionDims d = attention_dims(in, a);
      ir::Cost c;
      c.flops =
          2.0 * double(d.batch * d.q_heads * d.q_len * d.kv_len) * double(d.head_dim + d.v_dim);
      for (const TypeInfo& t : {in[0], in[1], in[2], out[0]})
        c.bytes += double(t.shape.numel()) * double(itemsize(t.dtype));
      return c;
    },
    .composite = [](CompositeCall& c) {
      const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
      std::array<TypeInfo, 3> types{q.type(), k.type(), v.type()};
      AttentionDims d = attention_dims(types, c.attrs);
      DType cd = compute_dtype(q.dtype());
      // Grouped heads as a batch dim: q [B, Hkv, G, Sq, D] against k and v
      // [B, Hkv, 1, Sk, *], so matmul broadcasts each kv head over its group.
      int64_t group = d.q_heads / d.kv_heads;
      Tensor qg = q.to(cd).reshape({d.batch, d.kv_heads, group, d.q_len, d.head_dim});
      Tensor scores = matmul(qg, k.to(cd).unsqueeze(2), false, true) * c.attrs.f("scale");
      if (c.attrs.b("causal")) {
        // The lowest finite value rather than -inf keeps debug mode's
        // finiteness check quiet; every row keeps at least its own key.
        Tensor mask = causal_mask(d.q_len, d.kv_len, c.attrs.i("sliding_window"), q.device());
        scores = where(mask, scores, scalar(lowest(cd), cd, q.device()));
      }
      Tensor probs = softmax(scores, -1).to(v.dtype());
      Tensor out = matmul(probs, v.unsqueeze(2));
      c.outputs = {out.reshape({d.batch, d.q_heads, d.q_len, d.v_dim})};
    },
});

}  // namespace
}  // namespace ops

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(q.dim(-1)));
  return apply1(
      ops::kAttention, {q, k, v},
      {{"causal", options.causal}, {"scale", scale}, {"sliding_window", options.sliding_window}});
}

}  // namespace kiln
