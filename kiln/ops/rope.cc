// The rope op (rotary position embedding) and its frequency tables.
#include <cmath>
#include <numbers>

#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/rope.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace ops {
namespace {

const OpDef& kRope = declare({
    .name = "rope",
    .num_inputs = 3,
    .infer = [](auto in, const Attrs&) {
      const TypeInfo &x = in[0], &cos = in[1], &sin = in[2];
      KILN_CHECK(is_floating(x.dtype) && x.shape.size() == 4 && x.shape[3] % 2 == 0,
                 "rope: x must be a floating [batch, seq, heads, head_dim] tensor with an even "
                 "head_dim, got ",
                 ir::to_string(x));
      Shape per_seq{x.shape[1], x.shape[3]}, per_batch{x.shape[0], x.shape[1], x.shape[3]};
      KILN_CHECK(is_floating(cos.dtype) && cos == sin &&
                     (cos.shape == per_seq || cos.shape == per_batch),
                 "rope: cos and sin must be floating tensors of one type shaped ", per_seq,
                 " or ", per_batch, " for x ", ir::to_string(x), ", got ", ir::to_string(cos),
                 " and ", ir::to_string(sin));
      return std::vector<TypeInfo>{x};
    },
    // One fused backward op instead of differentiating the composite. The
    // tables are constants in training: then dx alone, which is the rotation
    // transposed, dy * cos - rotate_half(dy * sin), so rope itself with
    // sin' = -swap_halves(sin) (dx = dy * cos + rotate_half(dy) * sin'),
    // and x need not be kept for the backward.
    .vjp = [](VjpCall& c) {
      const Tensor &x = c.inputs[0], &cos = c.inputs[1], &sin = c.inputs[2];
      if (!c.wants(1) && !c.wants(2)) {
        int64_t half = sin.dim(-1) / 2;
        Tensor transposed = -concat({sin.slice(-1, half, 2 * half), sin.slice(-1, 0, half)}, -1);
        c.grads = {rope(c.cot(0), cos, transposed), Tensor(), Tensor()};
        return;
      }
      std::vector<Tensor> g =
          kiln::apply(KILN_OP("rope_backward"), std::vector<Tensor>{x, cos, sin, c.cot(0)});
      c.grads = {g[0], g[1], g[2]};
    },
    .composite = [](CompositeCall& c) {
      const Tensor& x = c.inputs[0];
      DType cd = compute_dtype(x.dtype());
      Tensor xf = x.to(cd);
      // [..., seq, head_dim] -> [..., seq, 1, head_dim]: shared by the heads.
      Tensor cos = c.inputs[1].to(cd).unsqueeze(-2), sin = c.inputs[2].to(cd).unsqueeze(-2);
      int64_t half = x.dim(-1) / 2;
      Tensor rotated = concat({-xf.slice(-1, half, 2 * half), xf.slice(-1, 0, half)}, -1);
      c.outputs = {(xf * cos + rotated * sin).to(x.dtype())};
    },
});

}  // namespace
}  // namespace ops

std::vector<double> rope_inv_freq(int64_t head_dim, double theta,
                                  const std::optional<Llama31Scaling>& scaling) {
  KILN_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope_inv_freq: head_dim ", head_dim,
             " must be positive and even");
  KILN_CHECK(theta > 0, "rope_inv_freq: theta ", theta, " must be positive");
  std::vector<double> inv(size_t(head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
  if (!scaling) return inv;

  // HF's _compute_llama3_parameters: wavelengths shorter than
  // old_len / high_freq_factor keep their frequency, longer than
  // old_len / low_freq_factor divide it by factor, and the band between
  // interpolates smoothly.
  const Llama31Scaling& s = *scaling;
  KILN_CHECK(s.factor > 0 && s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0 &&
                 s.original_max_position_embeddings > 0,
             "rope_inv_freq: Llama 3.1 scaling needs factor > 0, high_freq_factor > "
             "low_freq_factor > 0 and original_max_position_embeddings > 0; got factor ",
             s.factor, ", low_freq_factor ", s.low_freq_factor, ", high_freq_factor ",
             s.high_freq_factor, ", original_max_position_embeddings ",
             s.original_max_position_embeddings);
  double old_len = double(s.original_max_position_embeddings);
  double low_freq_wavelen = old_len / s.low_freq_factor;
  double high_freq_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      f /= s.factor;
      continue;
    }
    double smooth =
        (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1 - smooth) * f / s.factor + smooth * f;
  }
  return inv;
}

RopeTables rope_tables(int64_t seq_len, int64_t head_dim, double theta,
                       const std::optional<Llama31Scaling>& scaling, DType dtype) {
  KILN_CHECK(seq_len >= 0, "rope_tables: seq_len ", seq_len, " must not be negative");
  KILN_CHECK(is_floating(dtype), "rope_tables: dtype ", dtype_name(dtype), " is not floating");
  std::vector<double> inv = rope_inv_freq(head_dim, theta, scaling);
  std::vector<double> cos(size_t(seq_len * head_dim)), sin(cos.size());
  for (int64_t p = 0; p < seq_len; ++p)
    for (int64_t j = 0; j < head_dim; ++j) {
      double angle = double(p) * inv[size_t(j) % inv.size()];
      cos[size_t(p * head_dim + j)] = std::cos(angle);
      sin[size_t(p * head_dim + j)] = std::sin(angle);
    }
  Shape shape{seq_len, head_dim};
  return {from_vector(cos, shape).to(dtype), from_vector(sin, shape).to(dtype)};
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return apply1(ops::kRope, {x, cos, sin});
}

}  // namespace kiln
