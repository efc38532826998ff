// What the tests of hand-written fused ops share, on any device: an op run
// through dispatch (its kernel on the inputs' device) or through its
// composite (basic ops only), value_and_grad of either, the comparison of
// the two with tolerances per dtype, and the attention cases.
//
// Tolerances (|fused - composite| <= atol + rtol * |composite|): the two
// compute in the same type (f32 for f32/bf16, f64 for f64) but sum in
// different orders and, in attention and cross-entropy, normalise online, so
// f64 agrees to ~1e-12 and f32 to ~1e-5 relative. bf16 results round once in
// the kernels; the composites also round the attention probabilities to bf16
// before the product with v (and bf16 gradients round once more), so bf16
// gets 2^-6 relative plus a small absolute term.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kiln/autograd/grad.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/tensor.h"

namespace kiln::test {

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType t);

inline constexpr DType kFusedDtypes[] = {DType::f32, DType::bf16, DType::f64};

using Runner = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The op through dispatch: its kernel on the inputs' device.
Runner fused(const std::string& name, const ir::Attrs& attrs);
// The op's composite, called directly: basic ops only.
Runner composite(const std::string& name, const ir::Attrs& attrs);

// value_and_grad of sum_j sum(out_j * cots[j]) (computed in f32/f64); the
// outputs come back as values[1..].
ValueAndGrad grads_of(const Runner& f, const std::vector<Tensor>& in,
                      const std::vector<Tensor>& cots);
// Random cotangents for f's outputs, on the inputs' device.
std::vector<Tensor> cotangents_for(const Runner& f, const std::vector<Tensor>& in, uint64_t seed);

// Forward outputs and (with `grads`) every floating input's gradient of the
// fused op agree with its composite's.
void expect_same(const std::string& op, const ir::Attrs& attrs, const std::vector<Tensor>& in,
                 Tol tol, const std::string& label, bool grads = true);

// Every tensor moved to `device`.
std::vector<Tensor> on_device(const std::vector<Tensor>& in, Device device);

// --------------------------------------------------------------- attention

ir::Attrs attention_attrs(int64_t head_dim, bool causal, int64_t window);

// Document ids [batch, seq] with random boundaries: each position starts a
// new document with probability 1/mean_len.
Tensor packed_doc_ids(int64_t batch, int64_t seq, double mean_len, uint64_t seed,
                      DType dtype = DType::i64);

struct AttentionCase {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
  bool causal;
  int64_t window;
  int docs;  // 0: none; 1: packed documents; 2: interleaved ids (not contiguous)
};

// q, k, v (and doc_ids where the case has documents) on the CPU.
std::vector<Tensor> attention_inputs(const AttentionCase& c, DType dt, uint64_t seed);
// The inputs of flash_attention_backward for the forward inputs `in` (on
// their device): q, k, v, a random dout, the forward's log-sum-exp, a
// random delta (as a cotangent of the log-sum-exp makes it), doc_ids.
std::vector<Tensor> attention_backward_inputs(const std::vector<Tensor>& in,
                                              const ir::Attrs& attrs, uint64_t seed);
// Shapes, masks and documents that cross the kernels' tile edges.
const std::vector<AttentionCase>& attention_cases();
std::string describe(const AttentionCase& c, DType dt);

// ---------------------------------------------------- linear cross-entropy

struct LceCase {
  int64_t rows, dim, vocab;
  std::string reduction;
  int64_t ignore_index;
  int ignored;  // rows whose target is ignore_index
};

// h, w and the targets, on the CPU.
std::vector<Tensor> lce_inputs(const LceCase& c, DType dt, uint64_t seed,
                               DType target_dtype = DType::i64);
// The backward's inputs: lce_inputs, then lse, dsoft and dtarget (f32 ones).
std::vector<Tensor> lce_backward_inputs(const LceCase& c, DType dt, uint64_t seed);
ir::Attrs lce_attrs(const LceCase& c);
// Reductions, ignored rows and vocabularies over one to three CPU tiles.
const std::vector<LceCase>& lce_cases();
std::string describe(const LceCase& c, DType dt);

// ------------------------------------------------------- grouped matmul

struct GroupCase {
  std::vector<int64_t> sizes;
  int64_t k, n;
  int64_t padding = 0;  // rows past the last group
};

// x [rows, k], w ([E, n, k] with transpose_w, else [E, k, n]) and the sizes, on the CPU.
std::vector<Tensor> group_inputs(const GroupCase& c, bool transpose_w, DType dt, uint64_t seed,
                                 DType size_dtype = DType::i64);
// a [rows, k], b [rows, n] and the sizes of grouped_matmul_weight_grad, on the CPU.
std::vector<Tensor> weight_grad_inputs(const GroupCase& c, DType dt, uint64_t seed);
// Random sizes for e experts, about `mean` rows each, some empty.
std::vector<int64_t> random_sizes(int64_t e, int64_t mean, uint64_t seed);
// Empty groups, no rows, groups over several row blocks, padding rows.
const std::vector<GroupCase>& group_cases();
std::string describe(const GroupCase& c, bool transpose_w, DType dt);

}  // namespace kiln::test
