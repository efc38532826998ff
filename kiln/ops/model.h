// The transformer's fused ops: RMSNorm, rotary embeddings, cross-entropy and
// attention. Each is one IR op whose composite is built from the basic ops;
// the composite runs wherever no fused kernel exists and fused kernels are
// tested against it. Autograd differentiates the composites of
// cross_entropy and attention; rms_norm and rope have vjp rules calling
// fused backward ops (kiln/ops/norm_rope_backward.cc). bf16/f16 inputs
// compute in f32, f64 inputs in f64, and results round once to the output
// dtype.
#pragma once
#include <optional>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln {

// y = x * rsqrt(mean(x^2 over the last axis) + eps) * weight, weight being
// [x.dim(-1)] of x's dtype. HF's LlamaRMSNorm rounds the normalised x to
// bf16 before multiplying by weight; here the product rounds once.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// The same from the basic ops (the op's composite), so autograd
// differentiates through them rather than the op's fused backward.
Tensor rms_norm_composite(const Tensor& x, const Tensor& weight, double eps);

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

enum class Reduction { mean, sum, none };

// Softmax cross-entropy of logits [..., V] against integer (i32/i64) class
// targets of shape [...], as torch.nn.functional.cross_entropy: targets
// equal to ignore_index contribute 0 and are left out of the mean (a mean
// over no targets is NaN, as in torch). The loss is f32 (f64 for f64
// logits) whatever the logits' dtype; torch rounds it to the logits' dtype.
// none: the per-target losses; mean, sum: a scalar.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

struct AttentionOptions {
  // Query i attends key j only if j <= i + (Sk - Sq): queries are the last
  // Sq positions of the Sk keys (bottom-right alignment, as flash-attention
  // and HF with a KV cache; the same as torch's is_causal when Sq == Sk).
  // Needs Sq <= Sk.
  bool causal = false;
  // Multiplies q @ k^T; default 1 / sqrt(head_dim).
  std::optional<double> scale;
  // 0: none. w > 0 (needs causal): query i also needs j > i + (Sk - Sq) - w,
  // so it sees the w most recent positions, itself included; with Sq == Sk,
  // i - w < j <= i (Mistral's and HF's sliding-window semantics).
  int64_t sliding_window = 0;
};

// softmax(q @ k^T * scale + mask) @ v with q [B, Hq, Sq, D], k [B, Hkv, Sk, D]
// and v [B, Hkv, Sk, Dv] of one floating dtype; the result is [B, Hq, Sq, Dv].
// Grouped-query attention when Hq is a multiple of Hkv: query head h reads
// kv head h / (Hq / Hkv) (HF's repeat_kv). Scores and softmax are computed in
// f32 (f64 for f64); the probabilities round to v's dtype for the product
// with v, as flash-attention does.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// The SwiGLU MLP, (silu(x @ w_gate^T) * (x @ w_up^T)) @ w_down^T, with the
// weights stored as Linear weights: w_gate, w_up [F, D], w_down [D, F].
// A plain function of basic ops, not an op.
Tensor swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down);

namespace ops {
// The dtype the model ops compute in: f64 for f64, otherwise f32.
inline DType compute_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }
}  // namespace ops

}  // namespace kiln
