#include "tests/support/fused_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/rules.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln::test {

Tol tol_for(DType t) {
  switch (t) {
    case DType::f64: return {1e-10, 1e-12};
    case DType::bf16: return {1.6e-2, 1e-2};
    default: return {1e-4, 2e-5};
  }
}

Runner fused(const std::string& name, const ir::Attrs& attrs) {
  return [name, attrs](const std::vector<Tensor>& in) {
    return apply(ir::get_op(name), in, attrs);
  };
}

Runner composite(const std::string& name, const ir::Attrs& attrs) {
  return [name, attrs](const std::vector<Tensor>& in) {
    const ir::OpDef& op = ir::get_op(name);
    ir::Attrs full = op.complete_attrs(attrs);
    CompositeCall call{in, full, {}};
    op.composite(call);
    return call.outputs;
  };
}

ValueAndGrad grads_of(const Runner& f, const std::vector<Tensor>& in,
                      const std::vector<Tensor>& cots) {
  auto vag = value_and_grad([&](const std::vector<Tensor>& a) {
    std::vector<Tensor> out = f(a);
    Tensor loss;
    for (size_t j = 0; j < cots.size(); ++j) {
      Tensor term = sum(out[j].to(cots[j].dtype()) * cots[j]);
      loss = loss.defined() ? loss + term : term;
    }
    std::vector<Tensor> values{loss};
    values.insert(values.end(), out.begin(), out.end());
    return values;
  });
  return vag(in);
}

std::vector<Tensor> cotangents_for(const Runner& f, const std::vector<Tensor>& in, uint64_t seed) {
  std::vector<Tensor> cots;
  for (const Tensor& o : f(in)) {
    DType cd = o.dtype() == DType::f64 ? DType::f64 : DType::f32;
    cots.push_back(random_tensor(o.shape(), cd, seed++).to(o.device()));
  }
  return cots;
}

void expect_same(const std::string& op, const ir::Attrs& attrs, const std::vector<Tensor>& in,
                 Tol tol, const std::string& label, bool grads) {
  SCOPED_TRACE(op + " " + label);
  Runner f = fused(op, attrs), c = composite(op, attrs);
  std::vector<Tensor> fo = f(in), co = c(in);
  ASSERT_EQ(fo.size(), co.size());
  for (size_t j = 0; j < fo.size(); ++j) {
    EXPECT_EQ(fo[j].type(), co[j].type()) << "output " << j;
    EXPECT_EQ(fo[j].device(), co[j].device()) << "output " << j;
    EXPECT_TRUE(all_close(fo[j], co[j], tol.rtol, tol.atol)) << "output " << j;
  }
  if (!grads) return;
  std::vector<Tensor> cots = cotangents_for(f, in, 99);
  ValueAndGrad fg = grads_of(f, in, cots), cg = grads_of(c, in, cots);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_floating(in[i].dtype())) continue;
    ASSERT_TRUE(fg.grads[i].defined() && cg.grads[i].defined()) << "input " << i;
    EXPECT_EQ(fg.grads[i].type(), in[i].type()) << "gradient of input " << i;
    EXPECT_TRUE(all_close(fg.grads[i], cg.grads[i], tol.rtol, tol.atol))
        << "gradient of input " << i;
  }
}

std::vector<Tensor> on_device(const std::vector<Tensor>& in, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.to(device));
  return out;
}

ir::Attrs attention_attrs(int64_t head_dim, bool causal, int64_t window) {
  return {{"causal", causal},
          {"scale", 1.0 / std::sqrt(double(head_dim))},
          {"sliding_window", window}};
}

Tensor packed_doc_ids(int64_t batch, int64_t seq, double mean_len, uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution boundary(1.0 / mean_len);
  std::vector<int64_t> ids;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t doc = 0;
    for (int64_t s = 0; s < seq; ++s) {
      if (s > 0 && boundary(rng)) ++doc;
      ids.push_back(doc);
    }
  }
  return from_vector(ids, {batch, seq}).to(dtype);
}

std::vector<Tensor> attention_inputs(const AttentionCase& c, DType dt, uint64_t seed) {
  std::vector<Tensor> in{
      random_tensor({c.batch, c.q_heads, c.q_len, c.head_dim}, dt, seed, -2, 2),
      random_tensor({c.batch, c.kv_heads, c.kv_len, c.head_dim}, dt, seed + 1, -2, 2),
      random_tensor({c.batch, c.kv_heads, c.kv_len, c.v_dim}, dt, seed + 2)};
  if (c.docs == 1) in.push_back(packed_doc_ids(c.batch, c.q_len, 23, seed + 3));
  if (c.docs == 2) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < c.batch * c.q_len; ++i) ids.push_back(int32_t(i * 7 % 3));
    in.push_back(from_vector(ids, {c.batch, c.q_len}));
  }
  return in;
}

std::vector<Tensor> attention_backward_inputs(const std::vector<Tensor>& in,
                                              const ir::Attrs& attrs, uint64_t seed) {
  std::vector<Tensor> fwd = fused("flash_attention", attrs)(in);
  const Device device = in[0].device();
  std::vector<Tensor> bin{in[0], in[1], in[2],
                          random_tensor(fwd[0].shape(), fwd[0].dtype(), seed).to(device), fwd[1],
                          random_tensor(fwd[1].shape(), fwd[1].dtype(), seed + 1).to(device)};
  if (in.size() == 4) bin.push_back(in[3]);
  return bin;
}

const std::vector<AttentionCase>& attention_cases() {
  static const std::vector<AttentionCase> cases = {
      // batch, hq, hkv, sq, sk, d, dv, causal, window, docs
      {1, 1, 1, 1, 1, 8, 8, false, 0, 0},
      {2, 2, 2, 37, 37, 16, 16, false, 0, 0},
      {2, 4, 2, 200, 200, 16, 16, true, 0, 0},        // GQA, causal, 2 blocks
      {1, 3, 1, 130, 130, 8, 12, true, 0, 0},         // MQA, v_dim != head_dim
      {1, 2, 2, 150, 150, 8, 8, true, 1, 0},          // window of one: only itself
      {1, 2, 1, 300, 300, 8, 8, true, 150, 0},        // window crossing blocks
      {1, 2, 2, 300, 300, 8, 8, true, 128, 0},        // window of exactly a block
      {1, 2, 2, 40, 170, 8, 8, true, 0, 0},           // queries are the last positions
      {2, 2, 2, 30, 195, 8, 8, true, 20, 0},          // ... with a window
      {2, 4, 2, 290, 290, 16, 16, true, 0, 1},        // packed documents, causal, GQA
      {2, 2, 1, 150, 150, 8, 8, false, 0, 1},         // packed documents, bidirectional
      {1, 2, 2, 270, 270, 8, 8, true, 30, 1},         // documents and a window
      {1, 2, 2, 140, 140, 8, 8, false, 0, 2},         // non-contiguous ids
      {1, 2, 1, 140, 140, 8, 8, true, 0, 2},
  };
  return cases;
}

std::string describe(const AttentionCase& c, DType dt) {
  return cat(dtype_name(dt), " B", c.batch, " Hq", c.q_heads, " Hkv", c.kv_heads, " Sq", c.q_len,
             " Sk", c.kv_len, " D", c.head_dim, " Dv", c.v_dim, c.causal ? " causal" : "",
             c.window ? cat(" window ", c.window) : std::string(),
             c.docs ? cat(" docs ", c.docs) : std::string());
}

std::vector<Tensor> lce_inputs(const LceCase& c, DType dt, uint64_t seed, DType target_dtype) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> t(size_t(c.rows));
  for (auto& x : t) x = int64_t(rng() % uint64_t(c.vocab));
  for (int i = 0; i < c.ignored && i < c.rows; ++i) t[size_t(i * 3 % c.rows)] = c.ignore_index;
  return {random_tensor({c.rows, c.dim}, dt, seed, -1, 1),
          random_tensor({c.vocab, c.dim}, dt, seed + 1, -1, 1),
          from_vector(t, {c.rows}).to(target_dtype)};
}

std::vector<Tensor> lce_backward_inputs(const LceCase& c, DType dt, uint64_t seed) {
  std::vector<Tensor> in = lce_inputs(c, dt, seed);
  for (int i = 0; i < 3; ++i) in.push_back(ones({c.rows}));
  return in;
}

ir::Attrs lce_attrs(const LceCase& c) {
  return {{"ignore_index", c.ignore_index}, {"reduction", c.reduction}};
}

const std::vector<LceCase>& lce_cases() {
  static const std::vector<LceCase> cases = {
      {1, 4, 3, "mean", -100, 0},
      {7, 8, 11, "mean", -100, 2},
      {20, 16, 4096, "sum", -100, 0},   // exactly one tile
      {37, 16, 4100, "mean", -100, 5},  // a second, narrow tile
      {70, 24, 9000, "none", -100, 4},  // three tiles, rows over two blocks
      {65, 8, 5000, "mean", 3, 6},      // a class index as ignore_index
      {9, 8, 40, "sum", -1, 9},         // every target ignored
  };
  return cases;
}

std::string describe(const LceCase& c, DType dt) {
  return cat(dtype_name(dt), " N", c.rows, " D", c.dim, " V", c.vocab, " ", c.reduction,
             " ignored ", c.ignored);
}

std::vector<Tensor> group_inputs(const GroupCase& c, bool transpose_w, DType dt, uint64_t seed,
                                 DType size_dtype) {
  int64_t rows = c.padding;
  for (int64_t s : c.sizes) rows += s;
  int64_t e = int64_t(c.sizes.size());
  Shape ws = transpose_w ? Shape{e, c.n, c.k} : Shape{e, c.k, c.n};
  return {random_tensor({rows, c.k}, dt, seed), random_tensor(ws, dt, seed + 1),
          from_vector(c.sizes, {e}).to(size_dtype)};
}

std::vector<Tensor> weight_grad_inputs(const GroupCase& c, DType dt, uint64_t seed) {
  std::vector<Tensor> in = group_inputs(c, true, dt, seed);
  return {in[0], random_tensor({in[0].dim(0), c.n}, dt, seed + 5), in[2]};
}

std::vector<int64_t> random_sizes(int64_t e, int64_t mean, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> s(static_cast<size_t>(e));
  for (auto& x : s) x = rng() % 4 == 0 ? 0 : int64_t(rng() % uint64_t(2 * mean + 1));
  return s;
}

const std::vector<GroupCase>& group_cases() {
  static const std::vector<GroupCase> cases = {
      {{3}, 4, 5},
      {{3, 0, 5, 1}, 8, 6},
      {{0, 0, 7}, 5, 3},
      {{0, 0, 0}, 4, 4},           // no rows at all
      {{130, 1, 64, 70}, 16, 24},  // groups over several row blocks
      {random_sizes(16, 20, 1), 12, 20},
      {random_sizes(64, 5, 2), 8, 16},
      {{3, 0, 2}, 4, 5, 7},  // padding rows (an expert-parallel receive buffer)
      {{0, 0}, 3, 2, 4},     // only padding
      {{70, 5}, 8, 6, 100},  // padding over several row blocks
  };
  return cases;
}

std::string describe(const GroupCase& c, bool transpose_w, DType dt) {
  return cat(dtype_name(dt), " experts ", c.sizes.size(), " k ", c.k, " n ", c.n, " padding ",
             c.padding, transpose_w ? " [E,N,K]" : " [E,K,N]");
}

}  // namespace kiln::test
