// The rope op (rotary position embedding) and its cos/sin tables. rope is
// one IR op whose composite is built from the basic ops; the composite runs
// wherever no fused kernel exists and the fused kernel is tested against
// it. Its vjp rule calls the fused backward op rope_backward
// (kiln/ops/norm_rope_backward.cc) where the tables' gradients are wanted,
// and rope itself with transposed tables where only x's is (training).
// Computes in ops::compute_dtype and rounds once.
#pragma once
#include <optional>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln {

// Llama 3.1's frequency scaling (HF rope_type "llama3"); the defaults are
// Llama 3.1's.
struct Llama31Scaling {
  double factor = 8;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

// The head_dim / 2 rotary frequencies theta^(-2i / head_dim), rescaled as
// HF's _compute_llama3_parameters when `scaling` is given. Computed in f64.
std::vector<double> rope_inv_freq(int64_t head_dim, double theta,
                                  const std::optional<Llama31Scaling>& scaling = std::nullopt);

struct RopeTables {
  Tensor cos, sin;  // [seq_len, head_dim] each
};
// cos and sin of position * inv_freq for positions 0..seq_len-1, the
// frequencies repeated twice along head_dim as in HF (cat(freqs, freqs)).
// Computed in f64 and rounded to `dtype`; HF computes the angles in f32, so
// at large positions its tables differ from these by that rounding.
RopeTables rope_tables(int64_t seq_len, int64_t head_dim, double theta,
                       const std::optional<Llama31Scaling>& scaling = std::nullopt,
                       DType dtype = DType::f32);

// Rotary embedding in HF's rotate_half convention (Llama 3, Qwen3):
// x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x2, x1), x1 and
// x2 the two halves of the last axis. x is [batch, seq, heads, head_dim];
// cos and sin are [seq, head_dim] (shared by the batch) or
// [batch, seq, head_dim] (per-sequence positions), of one floating dtype.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace kiln
