// The matmul op: its shape rule, cost and vjp.
#include "kiln/ops/matmul.h"

#include "kiln/ops/declare.h"

namespace kiln {
namespace ops {
namespace {

// The operand's [rows, cols] after its transpose flag.
std::pair<int64_t, int64_t> matrix_dims(const Shape& s, bool transpose) {
  int64_t r = s[s.size() - 2], c = s[s.size() - 1];
  return transpose ? std::pair{c, r} : std::pair{r, c};
}

Shape batch_dims(const Shape& s) {
  Shape b = s;
  b.erase(b.size() - 1);
  b.erase(b.size() - 1);
  return b;
}

TypeInfo matmul_type(std::span<const TypeInfo> in, const Attrs& a) {
  const TypeInfo &x = in[0], &y = in[1];
  bool ta = a.b("transpose_a"), tb = a.b("transpose_b");
  KILN_CHECK(x.shape.size() >= 2 && y.shape.size() >= 2, "matmul: operands need rank >= 2, got ",
             ir::to_string(x), " and ", ir::to_string(y),
             "; unsqueeze a vector to a [1,K] or [K,1] matrix first");
  KILN_CHECK(x.dtype == y.dtype, "matmul: operand dtypes differ (", ir::to_string(x), " and ",
             ir::to_string(y), "); convert one with .to(dtype)");
  KILN_CHECK(is_floating(x.dtype), "matmul: dtype ", dtype_name(x.dtype),
             " is not supported; use f32, bf16, f16 or f64");
  auto [m, k] = matrix_dims(x.shape, ta);
  auto [k2, n] = matrix_dims(y.shape, tb);
  KILN_CHECK(k == k2, "matmul: inner dimensions differ: ", ir::to_string(x), ta ? "^T" : "", " @ ",
             ir::to_string(y), tb ? "^T" : "", " is [", m, ",", k, "] @ [", k2, ",", n,
             "]; a's columns (rows with transpose_a) must equal b's rows (columns with transpose_b)");
  Shape out = broadcast_shapes(batch_dims(x.shape), batch_dims(y.shape), "matmul batch dims");
  out.push_back(m);
  out.push_back(n);
  return {x.dtype, out};
}

const OpDef& kMatmul = declare({
    .name = "matmul",
    .num_inputs = 2,
    .attrs = {{"transpose_a", AttrKind::bool_, false}, {"transpose_b", AttrKind::bool_, false}},
    .infer = [](auto in, const Attrs& a) { return std::vector<TypeInfo>{matmul_type(in, a)}; },
    .cost = [](auto in, auto out, const Attrs& a) {
      auto [m, k] = matrix_dims(in[0].shape, a.b("transpose_a"));
      const Shape& o = out[0].shape;
      ir::Cost c;
      c.flops = 2.0 * double(batch_dims(o).numel()) * double(m) * double(o.back()) * double(k);
      for (const TypeInfo& t : {in[0], in[1], out[0]})
        c.bytes += double(t.shape.numel()) * double(itemsize(t.dtype));
      return c;
    },
    .vjp = [](VjpCall& c) {
      // With A' = op(A), B' = op(B): dA' = G B'^T and dB' = A'^T G. Each is
      // one more matmul with flipped flags; a transposed operand takes the
      // transpose of its gradient, which swaps the factors.
      const Tensor &a = c.inputs[0], &b = c.inputs[1];
      bool ta = c.attrs.b("transpose_a"), tb = c.attrs.b("transpose_b");
      Tensor g = c.cot(0);
      Tensor da = ta ? matmul(b, g, tb, true) : matmul(g, b, false, !tb);
      Tensor db;
      if (b.rank() == 2 && a.rank() > 2 && !ta) {
        // A weight applied to batched activations: fold the batch into the
        // summed dim, one product instead of a batch of them then a sum.
        Tensor a2 = a.reshape({-1, a.dim(-1)}), g2 = g.reshape({-1, g.dim(-1)});
        db = tb ? matmul(g2, a2, true, false) : matmul(a2, g2, true, false);
      } else {
        db = tb ? matmul(g, a, true, ta) : matmul(a, g, !ta, false);
      }
      c.grads[0] = sum_to(da, a.shape());
      c.grads[1] = sum_to(db, b.shape());
    },
});

}  // namespace
}  // namespace ops

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return apply1(ops::kMatmul, {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
}

}  // namespace kiln
