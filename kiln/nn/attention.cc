#include "kiln/nn/attention.h"

#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/rope.h"

namespace kiln::nn {

ComponentRegistry<AttentionFn>& attention_impls() {
  static ComponentRegistry<AttentionFn> r("attention");
  return r;
}

Attention::Attention(const AttentionConfig& c, DType dtype)
    : config(c),
      q_proj(c.dim, c.n_heads * c.head_dim, c.bias, dtype),
      k_proj(c.dim, c.n_kv_heads * c.head_dim, c.bias, dtype),
      v_proj(c.dim, c.n_kv_heads * c.head_dim, c.bias, dtype),
      o_proj(c.n_heads * c.head_dim, c.dim, c.bias, dtype),
      attend_(attention_impls().get(c.impl)) {
  KILN_CHECK(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "Attention: n_heads ", c.n_heads,
             " must be a multiple of n_kv_heads ", c.n_kv_heads);
  // HF's registration order: q, k, v, o, then the norms.
  register_module("q_proj", &q_proj);
  register_module("k_proj", &k_proj);
  register_module("v_proj", &v_proj);
  register_module("o_proj", &o_proj);
  if (c.qk_norm) {
    q_norm = std::make_unique<RMSNorm>(c.head_dim, c.norm_eps, dtype, c.norm_impl);
    k_norm = std::make_unique<RMSNorm>(c.head_dim, c.norm_eps, dtype, c.norm_impl);
    register_module("q_norm", q_norm.get());
    register_module("k_norm", k_norm.get());
  }
}

Tensor Attention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                          const Tensor& doc_ids) const {
  Heads h = project(x, cos, sin);
  AttentionOptions options;
  options.causal = true;
  return output(attend(h.q, h.k, h.v, options, doc_ids));
}

Attention::Heads Attention::project(const Tensor& x, const Tensor& cos, const Tensor& sin) const {
  KILN_CHECK(x.rank() == 3 && x.dim(2) == config.dim, "Attention: x must be [batch, seq, ",
             config.dim, "], got ", dtype_name(x.dtype()), x.shape());
  const int64_t B = x.dim(0), S = x.dim(1), hd = config.head_dim;
  // [B, S, heads, head_dim]: the layout rope and the q/k norms work in. The
  // head counts come from the projections: under tensor parallelism they
  // hold this rank's heads only.
  Tensor in = apply_hook(input_hook, x);
  Tensor q = q_proj.forward(in).reshape({B, S, -1, hd});
  Tensor k = k_proj.forward(in).reshape({B, S, -1, hd});
  Tensor v = v_proj.forward(in).reshape({B, S, -1, hd});
  if (q_norm) q = q_norm->forward(q), k = k_norm->forward(k);
  return {rope(q, cos, sin).transpose(1, 2), rope(k, cos, sin).transpose(1, 2), v.transpose(1, 2)};
}

Tensor Attention::output(const Tensor& o) const {
  return o_proj.forward(o.transpose(1, 2).reshape({o.dim(0), o.dim(2), -1}));
}

Tensor masked_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed) {
  KILN_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4 && q.dim(1) % k.dim(1) == 0 &&
                 k.dim(2) == v.dim(2),
             "masked_attention: q [B, Hq, Sq, D], k [B, Hkv, Sk, D] and v [B, Hkv, Sk, Dv] "
             "with Hq a multiple of Hkv; got ", q.shape(), ", ", k.shape(), " and ", v.shape());
  const int64_t B = q.dim(0), Hkv = k.dim(1), G = q.dim(1) / Hkv, Sq = q.dim(2), D = q.dim(3),
                Sk = k.dim(2);
  KILN_CHECK(allowed.rank() == 3 && (allowed.dim(0) == B || allowed.dim(0) == 1) &&
                 allowed.dim(1) == Sq && allowed.dim(2) == Sk && allowed.dtype() == DType::b8,
             "masked_attention: allowed must be bool [", B, " or 1, ", Sq, ", ", Sk, "], got ",
             dtype_name(allowed.dtype()), allowed.shape());
  const DType ct = ops::compute_dtype(q.dtype());
  // Query heads grouped by the kv head they read: [B, Hkv, G, Sq, D].
  Tensor qg = q.reshape({B, Hkv, G, Sq, D}).to(ct);
  Tensor scores = matmul(qg, k.unsqueeze(2).to(ct), false, true) * (1.0 / std::sqrt(double(D)));
  double lowest = ct == DType::f64 ? std::numeric_limits<double>::lowest()
                                   : double(std::numeric_limits<float>::lowest());
  scores = where(allowed.reshape({allowed.dim(0), 1, 1, Sq, Sk}), scores,
                 scalar(lowest, ct, q.device()));
  Tensor p = softmax(scores, -1).to(v.dtype());
  return matmul(p, v.unsqueeze(2)).reshape({B, Hkv * G, Sq, v.dim(3)});
}

Tensor document_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& doc_ids) {
  const int64_t B = q.dim(0), S = q.dim(2);
  KILN_CHECK(q.rank() == 4 && k.rank() == 4 && k.dim(2) == S,
             "document_causal_attention: q [B, Hq, S, D] and k [B, Hkv, S, D]; got ", q.shape(),
             " and ", k.shape());
  KILN_CHECK(doc_ids.rank() == 2 && doc_ids.dim(0) == B && doc_ids.dim(1) == S &&
                 is_integer(doc_ids.dtype()),
             "document_causal_attention: doc_ids must be i32/i64 [", B, ", ", S, "], got ",
             dtype_name(doc_ids.dtype()), doc_ids.shape());
  Tensor pos = arange(0, double(S), 1, DType::i64, q.device());
  Tensor allowed = logical_and(le(pos, pos.unsqueeze(-1)),  // [S, S]: key <= query
                               eq(doc_ids.unsqueeze(-1), doc_ids.unsqueeze(1)));  // [B, S, S]
  return masked_attention(q, k, v, allowed);
}

}  // namespace kiln::nn
