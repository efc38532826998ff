// A Llama-style transformer block (RMSNorm, causal attention, SwiGLU MLP,
// residuals) forward + backward with value_and_grad, shared by the
// benchmarks that compare execution modes on it.
#pragma once
#include <cmath>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::bench {

struct BlockShape {
  int64_t batch = 4, seq = 256, dim = 512, heads = 8, ffn = 1376;
};

// Parameters: norm1, wq, wk, wv, wo, norm2, w_gate, w_up, w_down; then x.
inline std::vector<Tensor> block_inputs(const BlockShape& s, DType dtype = DType::f32) {
  Generator g(0);
  double sd = 1.0 / std::sqrt(double(s.dim));
  auto w = [&](int64_t rows, int64_t cols) { return (randn({rows, cols}, g) * sd).to(dtype); };
  return {ones({s.dim}, dtype), w(s.dim, s.dim), w(s.dim, s.dim), w(s.dim, s.dim), w(s.dim, s.dim),
          ones({s.dim}, dtype), w(s.ffn, s.dim), w(s.ffn, s.dim), w(s.dim, s.ffn),
          randn({s.batch, s.seq, s.dim}, g).to(dtype)};
}

inline Tensor block_loss(const std::vector<Tensor>& a, const BlockShape& s) {
  const Tensor& x = a[9];
  int64_t hd = s.dim / s.heads;
  auto heads = [&](const Tensor& t) { return t.reshape({s.batch, s.seq, s.heads, hd}).permute({0, 2, 1, 3}); };
  Tensor h = rms_norm(x, a[0], 1e-5);
  Tensor q = heads(matmul(h, a[1], false, true)), k = heads(matmul(h, a[2], false, true)),
         v = heads(matmul(h, a[3], false, true));
  Tensor att = scaled_dot_product_attention(q, k, v, {.causal = true});
  att = att.permute({0, 2, 1, 3}).reshape({s.batch, s.seq, s.dim});
  Tensor y = x + matmul(att, a[4], false, true);
  Tensor n = rms_norm(y, a[5], 1e-5);
  Tensor m = matmul(silu(matmul(n, a[6], false, true)) * matmul(n, a[7], false, true), a[8], false, true);
  return mean(square(y + m));
}

// Loss and the gradients of every parameter.
inline std::vector<Tensor> block_step(const std::vector<Tensor>& a, const BlockShape& s) {
  auto vag = value_and_grad([&](const std::vector<Tensor>& p) { return std::vector<Tensor>{block_loss(p, s)}; });
  ValueAndGrad r = vag(a);
  std::vector<Tensor> out{r.values[0]};
  for (size_t i = 0; i + 1 < r.grads.size(); ++i) out.push_back(r.grads[i]);
  return out;
}

}  // namespace kiln::bench
