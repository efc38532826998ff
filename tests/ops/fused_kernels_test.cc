// The fused CPU kernels against their ops' composites (the reference built
// from basic ops): forward outputs, and gradients from value_and_grad of the
// fused op (its vjp rule and backward kernel) against value_and_grad of the
// composite (autograd through the basic ops), over many shapes, masks and
// dtypes; finite-difference checks in f64; determinism across thread counts;
// bad inputs; and the memory the fused ops must not use.
// Tolerances: tests/support/fused_checks.h.
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/rms_norm.h"
#include "kiln/ops/rope.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "kiln/autograd/grad.h"
#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/rules.h"
#include "kiln/runtime/threads.h"
#include "tests/support/fused_checks.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace test;

// Same bits from 1, 2 and 3 threads, forward and backward.
void expect_thread_independent(const std::string& op, const ir::Attrs& attrs,
                               const std::vector<Tensor>& in) {
  SCOPED_TRACE(op);
  Runner f = fused(op, attrs);
  std::vector<Tensor> cots = cotangents_for(f, in, 7);
  int saved = num_threads();
  std::vector<std::vector<double>> first;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    ValueAndGrad r = grads_of(f, in, cots);
    std::vector<std::vector<double>> got;
    for (const Tensor& v : r.values) got.push_back(v.to_vector<double>());
    for (const Tensor& g : r.grads)
      if (g.defined()) got.push_back(g.to_vector<double>());
    if (first.empty()) first = got;
    else EXPECT_EQ(got, first) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST(FlashAttention, MatchesCompositeForwardAndBackward) {
  uint64_t seed = 1;
  for (const AttentionCase& c : attention_cases())
    for (DType dt : kFusedDtypes)
      expect_same("flash_attention", attention_attrs(c.head_dim, c.causal, c.window),
                  attention_inputs(c, dt, seed += 10), tol_for(dt), describe(c, dt));
}

TEST(FlashAttention, BackwardOpMatchesItsComposite) {
  // The backward op directly, with an arbitrary delta (as a cotangent of
  // the log-sum-exp makes it).
  for (const AttentionCase& c : {attention_cases()[2], attention_cases()[5], attention_cases()[9]}) {
    for (DType dt : {DType::f32, DType::f64}) {
      std::vector<Tensor> in = attention_inputs(c, dt, 5);
      ir::Attrs attrs = attention_attrs(c.head_dim, c.causal, c.window);
      expect_same("flash_attention_backward", attrs, attention_backward_inputs(in, attrs, 6),
                  tol_for(dt), describe(c, dt), false);
    }
  }
}

TEST(FlashAttention, MatchesScaledDotProductAttention) {
  // Without documents the fused op computes scaled_dot_product_attention.
  for (const AttentionCase& c : attention_cases()) {
    if (c.docs) continue;
    std::vector<Tensor> in = attention_inputs(c, DType::f64, 3);
    AttentionOptions o{.causal = c.causal, .sliding_window = c.window};
    EXPECT_TRUE(all_close(flash_attention(in[0], in[1], in[2], o),
                          scaled_dot_product_attention(in[0], in[1], in[2], o), 1e-10, 1e-12))
        << describe(c, DType::f64);
  }
}

TEST(FlashAttention, DocumentsAreIndependentSequences) {
  // Packed documents give each document's attention computed on its own.
  Tensor q = random_tensor({1, 2, 90, 8}, DType::f64, 1), k = random_tensor({1, 1, 90, 8}, DType::f64, 2),
         v = random_tensor({1, 1, 90, 8}, DType::f64, 3);
  std::vector<int64_t> ids(90, 0);
  int64_t bounds[] = {0, 17, 61, 90};
  for (int d = 0; d < 3; ++d)
    for (int64_t i = bounds[d]; i < bounds[d + 1]; ++i) ids[size_t(i)] = d;
  AttentionOptions o{.causal = true};
  Tensor packed = flash_attention(q, k, v, o, from_vector(ids, {1, 90}));
  for (int d = 0; d < 3; ++d) {
    int64_t a = bounds[d], b = bounds[d + 1];
    Tensor alone = scaled_dot_product_attention(q.slice(2, a, b), k.slice(2, a, b), v.slice(2, a, b), o);
    EXPECT_TRUE(all_close(packed.slice(2, a, b), alone, 1e-10, 1e-12)) << "document " << d;
  }
}

TEST(FlashAttention, GradientsMatchFiniteDifferences) {
  const AttentionCase cases[] = {
      {1, 2, 1, 5, 5, 3, 2, false, 0, 0},
      {1, 2, 1, 6, 6, 3, 3, true, 0, 0},
      {1, 2, 2, 6, 6, 2, 2, true, 2, 0},
      {1, 2, 1, 3, 6, 3, 3, true, 0, 0},
      {2, 2, 1, 7, 7, 2, 3, true, 0, 1},
      {1, 1, 1, 6, 6, 2, 2, false, 0, 2},
  };
  for (const AttentionCase& c : cases) {
    std::vector<Tensor> in = attention_inputs(c, DType::f64, 11);
    Tensor doc = in.size() == 4 ? in[3] : Tensor();
    AttentionOptions o{.causal = c.causal, .sliding_window = c.window};
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) { return flash_attention(a[0], a[1], a[2], o, doc); },
        {in[0], in[1], in[2]}))
        << describe(c, DType::f64);
  }
}

// The CPU backward runs in one pass where its (batch, kv head) tasks are at
// least 4 per thread, else in two: these cases (4 tasks) take the one pass on
// one thread and two passes on 2 and 3, so the bits of both are compared.
TEST(FlashAttention, OnePassBackwardMatchesComposite) {
  int saved = num_threads();
  set_num_threads(1);
  uint64_t seed = 40;
  for (const AttentionCase& c : {attention_cases()[2], attention_cases()[9]})
    for (DType dt : kFusedDtypes)
      expect_same("flash_attention", attention_attrs(c.head_dim, c.causal, c.window),
                  attention_inputs(c, dt, seed += 10), tol_for(dt), describe(c, dt));
  set_num_threads(saved);
}

TEST(FlashAttention, SameBitsForAnyThreadCount) {
  for (const AttentionCase& c : {attention_cases()[2], attention_cases()[9]})
    for (DType dt : {DType::f32, DType::bf16})
      expect_thread_independent("flash_attention", attention_attrs(c.head_dim, c.causal, c.window),
                                attention_inputs(c, dt, 4));
}

TEST(FlashAttention, RejectsBadInputs) {
  Tensor q = zeros({1, 2, 4, 8}), k = zeros({1, 1, 4, 8});
  AttentionOptions causal{.causal = true};
  EXPECT_THROW(flash_attention(q, k, k, causal, zeros({1, 4})), Error);  // float ids
  EXPECT_THROW(flash_attention(q, k, k, causal, zeros({1, 5}, DType::i64)), Error);
  EXPECT_THROW(flash_attention(q, zeros({1, 1, 6, 8}), zeros({1, 1, 6, 8}), causal,
                               zeros({1, 4}, DType::i64)),
               Error);  // documents need q_len == kv_len
  EXPECT_THROW(flash_attention(q, zeros({1, 3, 4, 8}), zeros({1, 3, 4, 8}), causal), Error);
  EXPECT_THROW(flash_attention(q, k, k.to(DType::f64), causal), Error);
  EXPECT_THROW(flash_attention(q, k, k, {.sliding_window = 3}), Error);  // window needs causal
  EXPECT_THROW(flash_attention(zeros({1, 2, 6, 8}), k, k, causal), Error);  // q_len > kv_len
}

// ---------------------------------------------------- linear cross-entropy

TEST(LinearCrossEntropy, MatchesCompositeForwardAndBackward) {
  uint64_t seed = 1;
  for (const LceCase& c : lce_cases()) {
    for (DType dt : kFusedDtypes) {
      // Mean over no targets is NaN (as torch); its gradient is not compared.
      bool grads = !(c.reduction == "mean" && c.ignored >= c.rows);
      expect_same("linear_cross_entropy", lce_attrs(c), lce_inputs(c, dt, seed += 10),
                  tol_for(dt), describe(c, dt), grads);
    }
  }
  expect_same("linear_cross_entropy", lce_attrs(lce_cases()[3]),
              lce_inputs(lce_cases()[3], DType::f32, 5, DType::i32), tol_for(DType::f32), "i32");
}

TEST(LinearCrossEntropy, EqualsCrossEntropyOfTheLogits) {
  for (const LceCase& c : lce_cases()) {
    std::vector<Tensor> in = lce_inputs(c, DType::f64, 2);
    Reduction r = c.reduction == "sum" ? Reduction::sum
                  : c.reduction == "none" ? Reduction::none : Reduction::mean;
    Tensor want = cross_entropy(matmul(in[0], in[1], false, true), in[2], c.ignore_index, r);
    EXPECT_TRUE(all_close(linear_cross_entropy(in[0], in[1], in[2], c.ignore_index, r), want,
                          1e-10, 1e-12))
        << c.vocab << " " << c.reduction;
  }
}

TEST(LinearCrossEntropy, GradientsMatchFiniteDifferences) {
  for (const char* red : {"mean", "sum", "none"}) {
    LceCase c{5, 3, 7, red, -100, 1};
    std::vector<Tensor> in = lce_inputs(c, DType::f64, 3);
    Reduction r = c.reduction == "sum" ? Reduction::sum
                  : c.reduction == "none" ? Reduction::none : Reduction::mean;
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) { return linear_cross_entropy(a[0], a[1], in[2], -100, r); },
        {in[0], in[1]}))
        << red;
  }
}

TEST(LinearCrossEntropy, SameBitsForAnyThreadCount) {
  expect_thread_independent("linear_cross_entropy", lce_attrs(lce_cases()[4]),
                            lce_inputs(lce_cases()[4], DType::f32, 4));
  expect_thread_independent("linear_cross_entropy", lce_attrs(lce_cases()[3]),
                            lce_inputs(lce_cases()[3], DType::bf16, 4));
}

TEST(LinearCrossEntropy, NeverHoldsTheLogits) {
  // 256 tokens x 32768 classes: 32 MiB of f32 logits, far more than h, w
  // and their gradients (2 x 8 MiB for w) need beyond them.
  LceCase c{256, 64, 32768, "mean", -100, 3};
  std::vector<Tensor> in = lce_inputs(c, DType::f32, 9);
  std::vector<Tensor> cots = cotangents_for(fused("linear_cross_entropy", lce_attrs(c)), in, 1);
  const int64_t logits = c.rows * c.vocab * 4;
  auto peak_of = [&](const Runner& f) {
    synchronize();
    int64_t base = memory_stats().allocated;
    reset_peak_memory();
    ValueAndGrad r = grads_of(f, in, cots);
    synchronize();
    return memory_stats().peak_allocated - base;
  };
  int64_t fused_peak = peak_of(fused("linear_cross_entropy", lce_attrs(c)));
  int64_t composite_peak = peak_of(composite("linear_cross_entropy", lce_attrs(c)));
  EXPECT_LT(fused_peak, logits) << "fused peak " << fused_peak;
  EXPECT_GT(composite_peak - fused_peak, logits)
      << "composite peak " << composite_peak << ", fused " << fused_peak;
}

TEST(LinearCrossEntropy, RejectsBadInputs) {
  Tensor h = zeros({4, 8}), w = zeros({10, 8});
  EXPECT_THROW(linear_cross_entropy(h, zeros({10, 7}), zeros({4}, DType::i64)), Error);
  EXPECT_THROW(linear_cross_entropy(h, w.to(DType::f64), zeros({4}, DType::i64)), Error);
  EXPECT_THROW(linear_cross_entropy(h, w, zeros({4})), Error);  // float targets
  EXPECT_THROW(linear_cross_entropy(h, w, zeros({5}, DType::i64)), Error);
  // A target outside [0, vocab) fails when the kernel runs.
  EXPECT_THROW(
      {
        Tensor t = from_vector(std::vector<int64_t>{0, 1, 10, 2}, {4});
        linear_cross_entropy(h, w, t).item<float>();
      },
      Error);
}

// ---------------------------------------------------------- grouped matmul

TEST(GroupedMatmul, MatchesCompositeForwardAndBackward) {
  uint64_t seed = 1;
  for (const GroupCase& c : group_cases())
    for (bool tw : {true, false})
      for (DType dt : kFusedDtypes)
        expect_same("grouped_matmul", {{"transpose_w", tw}}, group_inputs(c, tw, dt, seed += 10),
                    tol_for(dt), describe(c, tw, dt));
}

TEST(GroupedMatmul, WeightGradMatchesComposite) {
  uint64_t seed = 1;
  for (const GroupCase& c : group_cases())
    for (DType dt : kFusedDtypes) {
      std::vector<Tensor> in = weight_grad_inputs(c, dt, seed += 10);
      // With no rows the composite's gradient trips over matmul's vjp
      // (reshaping an empty [E, P, 0] operand to [-1, 0]).
      expect_same("grouped_matmul_weight_grad", {}, in, tol_for(dt), describe(c, true, dt),
                  in[0].dim(0) > 0);
    }
}

TEST(GroupedMatmul, EqualsPerExpertMatmuls) {
  const GroupCase& c = group_cases()[4];
  std::vector<Tensor> in = group_inputs(c, true, DType::f64, 3, DType::i32);
  Tensor y = grouped_matmul(in[0], in[1], in[2]);
  int64_t row = 0;
  for (size_t e = 0; e < c.sizes.size(); ++e) {
    Tensor want = matmul(in[0].slice(0, row, row + c.sizes[e]), in[1].select(0, int64_t(e)), false, true);
    EXPECT_TRUE(all_close(y.slice(0, row, row + c.sizes[e]), want, 1e-12, 1e-12)) << "expert " << e;
    row += c.sizes[e];
  }
}

TEST(GroupedMatmul, GradientsMatchFiniteDifferences) {
  for (bool tw : {true, false}) {
    GroupCase c{{2, 0, 3, 1}, 3, 2};
    std::vector<Tensor> in = group_inputs(c, tw, DType::f64, 5);
    EXPECT_TRUE(check_gradients(
        [&](const std::vector<Tensor>& a) {
          return apply1(ir::get_op("grouped_matmul"), {a[0], a[1], in[2]}, {{"transpose_w", tw}});
        },
        {in[0], in[1]}))
        << tw;
  }
  GroupCase c{{2, 0, 3}, 3, 2};
  std::vector<Tensor> in = group_inputs(c, true, DType::f64, 6);
  Tensor b = random_tensor({5, 4}, DType::f64, 7);
  EXPECT_TRUE(check_gradients(
      [&](const std::vector<Tensor>& a) {
        return apply1(ir::get_op("grouped_matmul_weight_grad"), {a[0], a[1], in[2]});
      },
      {in[0], b}));
}

TEST(GroupedMatmul, SameBitsForAnyThreadCount) {
  expect_thread_independent("grouped_matmul", {}, group_inputs(group_cases()[5], true, DType::f32, 4));
  expect_thread_independent("grouped_matmul", {},
                            group_inputs(group_cases()[4], true, DType::bf16, 4));
}

TEST(GroupedMatmul, RejectsBadInputs) {
  Tensor x = zeros({5, 4}), w = zeros({2, 3, 4});
  EXPECT_THROW(grouped_matmul(x, zeros({2, 3, 5}), zeros({2}, DType::i64)), Error);
  EXPECT_THROW(grouped_matmul(x, w, zeros({3}, DType::i64)), Error);  // one size per expert
  EXPECT_THROW(grouped_matmul(x, w, zeros({2})), Error);              // float sizes
  EXPECT_THROW(grouped_matmul(x, w.to(DType::f64), zeros({2}, DType::i64)), Error);
  // Sizes are checked when the kernel runs: they must sum to the rows.
  auto run = [&](std::vector<int64_t> sizes) {
    grouped_matmul(x, w, from_vector(sizes, {2})).to_vector<float>();
  };
  EXPECT_THROW(run({3, 3}), Error);  // more than the rows
  EXPECT_THROW(run({6, -1}), Error);
  EXPECT_NO_THROW(run({5, 0}));
  EXPECT_NO_THROW(run({2, 2}));  // one padding row
}

// Padding rows give zeros, and neither they nor their cotangents reach the
// weight's gradient.
TEST(GroupedMatmul, PaddingRowsAreZeroAndAddNoGradient) {
  GroupCase c{{2, 3}, 4, 3, 5};
  std::vector<Tensor> in = group_inputs(c, true, DType::f64, 9);
  Tensor y = grouped_matmul(in[0], in[1], in[2]);
  EXPECT_TRUE(all_close(y.slice(0, 5, 10), zeros({5, 3}, DType::f64), 0, 0));
  Tensor b = random_tensor({10, 3}, DType::f64, 10);
  Tensor g = apply1(ir::get_op("grouped_matmul_weight_grad"), {b, in[0], in[2]});
  Tensor g_used = apply1(ir::get_op("grouped_matmul_weight_grad"),
                         {b.slice(0, 0, 5), in[0].slice(0, 0, 5), from_vector<int64_t>({2, 3}, {2})});
  EXPECT_TRUE(all_close(g, g_used, 1e-12, 1e-12));
}

// bf16 products run on oneDNN's bf16 matmul where the CPU has bf16 dot
// products, widened to f32 elsewhere (cpu/matmul_path.h): the fused kernels
// match their composites on either path.
TEST(FusedOps, Bf16OnEitherMatmulPath) {
  for (cpu::MatmulPath path : {cpu::MatmulPath::onednn, cpu::MatmulPath::widened_to_f32}) {
    SCOPED_TRACE(path == cpu::MatmulPath::onednn ? "bf16 by oneDNN" : "bf16 widened to f32");
    cpu::set_bf16_matmul_path(path);
    uint64_t seed = 11;
    for (int i : {2, 5, 9}) {
      const AttentionCase& c = attention_cases()[size_t(i)];
      expect_same("flash_attention", attention_attrs(c.head_dim, c.causal, c.window),
                  attention_inputs(c, DType::bf16, seed += 10), tol_for(DType::bf16),
                  describe(c, DType::bf16));
    }
    for (int i : {3, 4}) {
      const LceCase& c = lce_cases()[size_t(i)];
      expect_same("linear_cross_entropy", lce_attrs(c), lce_inputs(c, DType::bf16, seed += 10),
                  tol_for(DType::bf16), describe(c, DType::bf16));
    }
  }
  cpu::set_bf16_matmul_path(std::nullopt);
}

TEST(FusedOps, HalfPrecision) {
  // f16 computes as bf16 does (16-bit products, f32 elsewhere); one case per op.
  Tol tol = tol_for(DType::bf16);
  expect_same("flash_attention", attention_attrs(16, true, 0),
              attention_inputs(attention_cases()[9], DType::f16, 1), tol, "f16");
  expect_same("linear_cross_entropy", lce_attrs(lce_cases()[3]),
              lce_inputs(lce_cases()[3], DType::f16, 2), tol, "f16");
  expect_same("grouped_matmul", {}, group_inputs(group_cases()[4], true, DType::f16, 3), tol, "f16");
  Tensor x = random_tensor({3, 40}, DType::f16, 4, -2, 2), w = random_tensor({40}, DType::f16, 5);
  expect_same("rms_norm", {{"eps", 1e-6}}, {x, w}, tol, "f16");
  expect_same("silu_mul", {}, {x, random_tensor({3, 40}, DType::f16, 6)}, tol, "f16");
  expect_same("rope", {},
              {random_tensor({1, 3, 2, 8}, DType::f16, 7), random_tensor({3, 8}, DType::f32, 8),
               random_tensor({3, 8}, DType::f32, 9)},
              tol, "f16");
}

TEST(FusedOps, SameResultsInEveryExecutionMode) {
  // The fused ops amid elementwise ops the compiler may fuse around them:
  // forward and gradients in defer_and_fuse and compile(fn) give strict
  // mode's bits.
  Tensor x = random_tensor({1, 70, 2, 16}, DType::f32, 1), w = random_tensor({16}, DType::f32, 2);
  RopeTables rt = rope_tables(70, 16, 10000);
  Tensor doc = packed_doc_ids(1, 70, 20, 3), sizes = from_vector(std::vector<int64_t>{50, 0, 90}, {3});
  Tensor gw = random_tensor({3, 8, 16}, DType::f32, 4), lw = random_tensor({40, 8}, DType::f32, 5);
  std::vector<int64_t> t(140);
  for (size_t i = 0; i < t.size(); ++i) t[i] = int64_t(i * 7 % 40);
  Tensor targets = from_vector(t, {140});
  auto step = value_and_grad([&](const std::vector<Tensor>& a) {
    Tensor q = rope(rms_norm(a[0] * 1.5, a[1], 1e-6), rt.cos, rt.sin).permute({0, 2, 1, 3});
    Tensor att = flash_attention(q, q * 0.5, q + 1.0, {.causal = true}, doc);
    Tensor m = silu_mul(att + 1.0, att * 0.5).reshape({140, 16});
    Tensor y = grouped_matmul(m - 0.25, a[2], sizes);
    return std::vector<Tensor>{linear_cross_entropy(y * 2.0, a[3], targets)};
  });
  auto flatten = [](const ValueAndGrad& r) {
    std::vector<std::vector<double>> out{r.values[0].to_vector<double>()};
    for (const Tensor& g : r.grads) out.push_back(g.to_vector<double>());
    return out;
  };
  std::vector<Tensor> args{x, w, gw, lw};
  auto strict = flatten(step(args));
  {
    EagerModeGuard guard(EagerMode::defer_and_fuse);
    EXPECT_EQ(flatten(step(args)), strict) << "defer_and_fuse";
  }
  CompiledFunction compiled = compile([&](const std::vector<Tensor>& a) {
    ValueAndGrad r = step(a);
    std::vector<Tensor> out = r.values;
    out.insert(out.end(), r.grads.begin(), r.grads.end());
    return out;
  });
  std::vector<Tensor> c = compiled(args);
  ValueAndGrad r{{c[0]}, {c.begin() + 1, c.end()}};
  EXPECT_EQ(flatten(r), strict) << "compile";
}

// -------------------------------------------------- rms_norm, rope, silu_mul

TEST(FusedRmsNorm, MatchesComposite) {
  for (Shape s : {Shape{5}, Shape{3, 7}, Shape{2, 3, 64}, Shape{4, 1, 1000}, Shape{0, 8}})
    for (DType dt : kFusedDtypes)
      for (double eps : {1e-6, 1e-2}) {
        std::vector<Tensor> in{random_tensor(s, dt, 1, -2, 2),
                               random_tensor({s[s.size() - 1]}, dt, 2, 0.5, 1.5)};
        expect_same("rms_norm", {{"eps", eps}}, in, tol_for(dt), cat(dtype_name(dt), " ", s));
      }
}

TEST(FusedRmsNorm, BackwardOpMatchesItsComposite) {
  for (Shape s : {Shape{3, 7}, Shape{70, 33}})
    for (DType dt : kFusedDtypes) {
      std::vector<Tensor> in{random_tensor(s, dt, 1, -2, 2), random_tensor({s[1]}, dt, 2),
                             random_tensor(s, dt, 3)};
      expect_same("rms_norm_backward", {{"eps", 1e-5}}, in, tol_for(dt), cat(dtype_name(dt), " ", s));
    }
}

TEST(FusedRope, MatchesComposite) {
  for (DType dt : kFusedDtypes)
    for (DType table : {DType::f32, DType::f64}) {
      for (bool per_batch : {false, true}) {
        Shape xs{2, 5, 3, 8};
        Shape ts = per_batch ? Shape{2, 5, 8} : Shape{5, 8};
        std::vector<Tensor> in{random_tensor(xs, dt, 1), random_tensor(ts, table, 2),
                               random_tensor(ts, table, 3)};
        std::string label = cat(dtype_name(dt), " tables ", dtype_name(table), per_batch ? " per batch" : "");
        expect_same("rope", {}, in, tol_for(dt), label);
        std::vector<Tensor> bin = in;
        bin.push_back(random_tensor(xs, dt, 4));
        expect_same("rope_backward", {}, bin, tol_for(dt), label, false);
      }
    }
}

// With constant tables (training) rope's gradient is rope with transposed
// tables: the same bits as rope_backward's dx, and no rope_backward (which
// reads x) in the recorded backward.
TEST(FusedRope, GradientOfXAloneIsTheTransposedRotation) {
  for (DType dt : kFusedDtypes)
    for (DType table : {DType::f32, DType::f64})
      for (bool per_batch : {false, true}) {
        Shape xs{2, 5, 3, 8};
        Shape ts = per_batch ? Shape{2, 5, 8} : Shape{5, 8};
        Tensor x = random_tensor(xs, dt, 1), cos = random_tensor(ts, table, 2),
               sin = random_tensor(ts, table, 3), dy = random_tensor(xs, dt, 4);
        auto loss = [&](const std::vector<Tensor>& a) {
          return std::vector<Tensor>{sum(rope(a[0], cos, sin) * dy)};
        };
        std::string label = cat(dtype_name(dt), " tables ", dtype_name(table), per_batch ? " per batch" : "");
        Tensor dx = value_and_grad(loss)({x}).grads[0];
        Tensor want = fused("rope_backward", {})({x, cos, sin, dy})[0];
        EXPECT_EQ(dx.to(DType::f64).to_vector<double>(), want.to(DType::f64).to_vector<double>()) << label;
        auto rec = trace_loss_and_grads(loss, {x});
        for (const ir::Node& n : rec->graph.nodes()) EXPECT_NE(n.op->name, "rope_backward") << label;
      }
  for (bool per_batch : {false, true}) {
    Shape ts = per_batch ? Shape{2, 3, 4} : Shape{3, 4};
    Tensor cos = random_tensor(ts, DType::f64, 6), sin = random_tensor(ts, DType::f64, 7);
    EXPECT_TRUE(check_gradients([&](const auto& x) { return rope(x[0], cos, sin); },
                                {random_tensor({2, 3, 2, 4}, DType::f64, 5)}))
        << per_batch;
  }
}

TEST(FusedSiluMul, MatchesComposite) {
  for (Shape s : {Shape{7}, Shape{3, 50}, Shape{2, 3, 1000}})
    for (DType dt : kFusedDtypes) {
      std::vector<Tensor> in{random_tensor(s, dt, 1, -6, 6), random_tensor(s, dt, 2, -2, 2)};
      expect_same("silu_mul", {}, in, tol_for(dt), cat(dtype_name(dt), " ", s));
    }
  // A transposed (strided) gate.
  Tensor g = random_tensor({6, 4}, DType::f32, 5).t(), u = random_tensor({4, 6}, DType::f32, 6);
  EXPECT_TRUE(all_close(silu_mul(g, u), silu(g) * u, 1e-6, 1e-7));
  EXPECT_THROW(silu_mul(zeros({2, 3}), zeros({3})), Error);
  EXPECT_THROW(silu_mul(zeros({2, 3}), zeros({2, 3}, DType::f64)), Error);
}

TEST(FusedSiluMul, BackwardOpMatchesItsComposite) {
  for (Shape s : {Shape{7}, Shape{3, 50}, Shape{2, 3, 1000}})
    for (DType dt : kFusedDtypes) {
      std::vector<Tensor> in{random_tensor(s, dt, 1, -6, 6), random_tensor(s, dt, 2, -2, 2),
                             random_tensor(s, dt, 3)};
      expect_same("silu_mul_backward", {}, in, tol_for(dt), cat(dtype_name(dt), " ", s), false);
    }
  // A transposed (strided) gate takes the kernel's two-pass path: the same
  // bits as the one pass over dense inputs.
  for (DType dt : kFusedDtypes) {
    Tensor g = random_tensor({40, 30}, dt, 4, -6, 6).t(), u = random_tensor({30, 40}, dt, 5),
           dy = random_tensor({30, 40}, dt, 6);
    std::vector<Tensor> strided = fused("silu_mul_backward", {})({g, u, dy});
    std::vector<Tensor> dense = fused("silu_mul_backward", {})({g.contiguous(), u, dy});
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(strided[k].to(DType::f64).to_vector<double>(), dense[k].to(DType::f64).to_vector<double>())
          << dtype_name(dt) << " output " << k;
    expect_same("silu_mul_backward", {}, {g, u, dy}, tol_for(dt), cat(dtype_name(dt), " strided"), false);
  }
}

TEST(FusedPointwise, GradientsMatchFiniteDifferences) {
  Tensor a = random_tensor({3, 4}, DType::f64, 1, -3, 3), b = random_tensor({3, 4}, DType::f64, 2);
  EXPECT_TRUE(check_gradients([](const auto& x) { return silu_mul(x[0], x[1]); }, {a, b}));
  // rms_norm and rope gradients now come from their backward ops.
  EXPECT_TRUE(check_gradients([](const auto& x) { return rms_norm(x[0], x[1], 1e-3); },
                              {random_tensor({4, 5}, DType::f64, 3, -2, 2),
                               random_tensor({5}, DType::f64, 4, 0.5, 1.5)}));
  for (bool per_batch : {false, true}) {
    Shape ts = per_batch ? Shape{2, 3, 4} : Shape{3, 4};
    EXPECT_TRUE(check_gradients([](const auto& x) { return rope(x[0], x[1], x[2]); },
                                {random_tensor({2, 3, 2, 4}, DType::f64, 5),
                                 random_tensor(ts, DType::f64, 6), random_tensor(ts, DType::f64, 7)}))
        << per_batch;
  }
}

TEST(FusedPointwise, SameBitsForAnyThreadCount) {
  expect_thread_independent("rms_norm", {{"eps", 1e-6}},
                            {random_tensor({300, 64}, DType::f32, 1), random_tensor({64}, DType::f32, 2)});
  expect_thread_independent("rope", {},
                            {random_tensor({2, 40, 4, 16}, DType::f32, 1),
                             random_tensor({40, 16}, DType::f32, 2), random_tensor({40, 16}, DType::f32, 3)});
}

}  // namespace
}  // namespace kiln
