// Hand-written fused ops (not the compiler-made "fused" groups of
// kiln/compiler/fuse.h; docs/architecture.md, "Two kinds of fused"): each
// is one IR op with a composite built from the basic ops (the reference its
// CPU kernel is tested against, and the path on devices without a kernel),
// and a vjp rule that calls a separate backward op, itself with a kernel and
// a composite. None materialises the large intermediate
// the composite does (attention scores, vocabulary logits, per-expert
// slices). bf16/f16 inputs compute in f32, f64 inputs in f64.
//
// The fused kernels for the existing ops rms_norm and rope need no new
// functions: their CPU kernels replace the composites under the same names.
#pragma once
#include "kiln/ops/attention.h"
#include "kiln/ops/cross_entropy.h"

namespace kiln {

// scaled_dot_product_attention computed block by block with an online
// softmax, never holding a q_len x kv_len score matrix. q [B, Hq, Sq, D],
// k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (GQA: Hq a multiple of Hkv);
// `options` as for scaled_dot_product_attention. doc_ids, when given, is an
// i32/i64 [B, S] tensor (needs Sq == Sk == S): query i attends key j only
// if doc_ids[b, i] == doc_ids[b, j], so packed documents never see each
// other. Every query must keep at least one key (always so with causal
// masks or document ids, which keep the query's own position).
// The op "flash_attention" has a second output, the f32 (f64 for f64)
// log-sum-exp of each query's scores [B, Hq, Sq], which its backward op
// "flash_attention_backward" reads.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, const Tensor& doc_ids = Tensor());

// cross_entropy(matmul(h, w, false, true), targets, ignore_index, reduction)
// computed one vocabulary tile at a time, never holding the [N, V] logits:
// h [N, D] hidden states, w [V, D] the LM-head weight, targets [N] i32/i64.
// The op "linear_cross_entropy" has a second output, each row's f32 (f64)
// log-sum-exp [N], which its backward op "linear_cross_entropy_backward"
// reads.
Tensor linear_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets,
                            int64_t ignore_index = -100, Reduction reduction = Reduction::mean);

// Per-expert Linear layers in one op: x [T, K] holds the rows of expert 0,
// then expert 1, ... (group e is the next group_sizes[e] rows), w [E, N, K]
// holds each expert's weight in Linear layout, group_sizes [E] (i32/i64,
// non-negative, summing to at most T; checked when the op runs). Row t of
// the [T, N] result is x[t] @ w[e]^T for t's group e; rows past the last
// group are padding (a static-shaped buffer of which only a data-dependent
// prefix is used, as after an expert-parallel exchange): their results are
// zeros and they add nothing to the weight's gradient.
Tensor grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& group_sizes);

// The SwiGLU activation silu(gate) * up in one pass, for gate and up of one
// shape and floating dtype (rounded once).
Tensor silu_mul(const Tensor& gate, const Tensor& up);

}  // namespace kiln
