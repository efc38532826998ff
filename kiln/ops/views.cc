// View ops: eager modes run them as metadata over the input's storage (the
// view rule); graphs and kernels see ordinary ops that copy. Each view's
// scatter rule is its inverse: traces turn a write through the view into
// that functional update of the base (kiln/runtime/view_chain.h).
#include "kiln/ops/views.h"

#include <algorithm>

#include "kiln/ops/declare.h"

namespace kiln {
namespace ops {
namespace {

using ir::Layout;

std::optional<Layout> contiguous_view(const Layout& in, const Shape& out) {
  if (!is_contiguous(in.shape, in.strides)) return std::nullopt;
  return Layout{out, contiguous_strides(out), in.offset};
}

// The normalised slice of `axis`: start, element count, step.
struct SliceSpec {
  int axis;
  int64_t start, count, step;
};
SliceSpec slice_spec(const Shape& shape, const Attrs& a) {
  SliceSpec s;
  s.axis = normalize_axis(a.i("axis"), shape.size(), "slice");
  s.step = a.i("step");
  KILN_CHECK(s.step >= 1, "slice: step ", s.step, " must be positive");
  int64_t n = shape[s.axis];
  auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t start = clamp(a.i("start")), stop = clamp(a.i("stop"));
  s.start = start;
  s.count = stop > start ? (stop - start + s.step - 1) / s.step : 0;
  return s;
}

std::vector<int64_t> permutation(const Attrs& a, int rank) {
  const auto& dims = a.ints("dims");
  KILN_CHECK(int(dims.size()) == rank, "permute: ", dims.size(), " dims given for a rank-", rank,
             " tensor");
  std::vector<int64_t> p;
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    int n = normalize_axis(d, rank, "permute");
    KILN_CHECK(!seen[n], "permute: axis ", d, " appears twice");
    seen[n] = true;
    p.push_back(n);
  }
  return p;
}

Shape expanded_shape(const Shape& in, const Attrs& a) {
  Shape target(a.ints("shape"));
  KILN_CHECK(target.size() >= in.size(), "expand: cannot expand rank ", in.size(), " to ", target);
  int lead = target.size() - in.size();
  for (int i = 0; i < target.size(); ++i) {
    if (i < lead) continue;
    if (target[i] == -1) target[i] = in[i - lead];
    KILN_CHECK(in[i - lead] == target[i] || in[i - lead] == 1, "expand: dimension ", i, " of size ",
               in[i - lead], " cannot expand to ", target[i], " (only size-1 dimensions expand)");
  }
  return target;
}

// The inverse of a view that keeps every element once, in order.
void reshape_back(ViewScatterCall& c) { c.result = c.value.reshape(c.base.shape()); }

const OpDef& kReshape = declare({
    .name = "reshape",
    .attrs = {{"shape", AttrKind::ints, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      Shape s(a.ints("shape"));
      KILN_CHECK(s.numel() == in[0].shape.numel(), "reshape: cannot reshape ", in[0].shape, " (",
                 in[0].shape.numel(), " elements) to ", s, " (", s.numel(), " elements)");
      return std::vector<TypeInfo>{{in[0].dtype, s}};
    },
    .fusion = ir::FusionClass::view,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0).reshape(c.inputs[0].shape()); },
    .view = [](const Layout& in, const Attrs& a) { return contiguous_view(in, Shape(a.ints("shape"))); },
    .view_scatter = reshape_back,
    .reinterprets_first_input = true,
});

const OpDef& kPermute = declare({
    .name = "permute",
    .attrs = {{"dims", AttrKind::ints, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      auto p = permutation(a, in[0].shape.size());
      Shape s;
      for (int64_t d : p) s.push_back(in[0].shape[d]);
      return std::vector<TypeInfo>{{in[0].dtype, s}};
    },
    .fusion = ir::FusionClass::view,
    .vjp = [](VjpCall& c) {
      auto p = permutation(c.attrs, c.inputs[0].rank());
      std::vector<int64_t> inv(p.size());
      for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = int64_t(i);
      c.grads[0] = c.cot(0).permute(inv);
    },
    .view = [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
      auto p = permutation(a, in.shape.size());
      Layout out{{}, {}, in.offset};
      for (int64_t d : p) out.shape.push_back(in.shape[d]), out.strides.push_back(in.strides[d]);
      return out;
    },
    .view_scatter = [](ViewScatterCall& c) {
      auto p = permutation(c.attrs, c.base.rank());
      std::vector<int64_t> inv(p.size());
      for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = int64_t(i);
      c.result = c.value.permute(inv);
    },
});

const OpDef& kSlice = declare({
    .name = "slice",
    .attrs = {{"axis", AttrKind::int_, std::nullopt},
              {"start", AttrKind::int_, std::nullopt},
              {"stop", AttrKind::int_, std::nullopt},
              {"step", AttrKind::int_, int64_t{1}}},
    .infer = [](auto in, const Attrs& a) {
      SliceSpec s = slice_spec(in[0].shape, a);
      Shape out = in[0].shape;
      out[s.axis] = s.count;
      return std::vector<TypeInfo>{{in[0].dtype, out}};
    },
    .fusion = ir::FusionClass::view,
    .vjp = [](VjpCall& c) {
      c.grads[0] = slice_scatter(zeros_like(c.inputs[0]), c.cot(0), c.attrs.i("axis"),
                                 c.attrs.i("start"), c.attrs.i("stop"), c.attrs.i("step"));
    },
    .view = [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
      SliceSpec s = slice_spec(in.shape, a);
      Layout out = in;
      out.offset += s.start * in.strides[s.axis];
      out.shape[s.axis] = s.count;
      out.strides[s.axis] *= s.step;
      return out;
    },
    .view_scatter = [](ViewScatterCall& c) {
      const Attrs& a = c.attrs;
      c.result = slice_scatter(c.base, c.value, a.i("axis"), a.i("start"), a.i("stop"), a.i("step"));
    },
});

const OpDef& kExpand = declare({
    .name = "expand",
    .attrs = {{"shape", AttrKind::ints, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      return std::vector<TypeInfo>{{in[0].dtype, expanded_shape(in[0].shape, a)}};
    },
    .fusion = ir::FusionClass::view,
    .vjp = [](VjpCall& c) { c.grads[0] = sum_to(c.cot(0), c.inputs[0].shape()); },
    .view = [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
      Shape target = expanded_shape(in.shape, a);
      int lead = target.size() - in.shape.size();
      Layout out{target, Dims::filled(target.size(), 0), in.offset};
      for (int i = lead; i < target.size(); ++i)
        out.strides[i] = in.shape[i - lead] == target[i] ? in.strides[i - lead] : 0;
      return out;
    },
    .view_scatter = [](ViewScatterCall& c) {
      KILN_CHECK(c.value.numel() == c.base.numel(), "in-place write through expand (",
                 ir::to_string(c.base.type()), " -> ", ir::to_string(c.value.type()),
                 ") inside traced code: several elements of the view are one element of its "
                 "base, so the write is ambiguous; write into a copy of the expanded tensor or "
                 "into the tensor before it was expanded");
      reshape_back(c);
    },
});

Shape squeezed(const Shape& in, const Attrs& a) {
  int axis = normalize_axis(a.i("axis"), in.size(), "squeeze");
  KILN_CHECK(in[axis] == 1, "squeeze: axis ", a.i("axis"), " has size ", in[axis], ", not 1");
  Shape out = in;
  out.erase(axis);
  return out;
}

Shape unsqueezed(const Shape& in, const Attrs& a) {
  int axis = normalize_axis(a.i("axis"), in.size() + 1, "unsqueeze");
  Shape out = in;
  out.insert(axis, 1);
  return out;
}

const OpDef& kSqueeze = declare({
    .name = "squeeze",
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      return std::vector<TypeInfo>{{in[0].dtype, squeezed(in[0].shape, a)}};
    },
    .fusion = ir::FusionClass::view,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0).reshape(c.inputs[0].shape()); },
    .view = [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
      int axis = normalize_axis(a.i("axis"), in.shape.size(), "squeeze");
      Layout out = in;
      out.shape.erase(axis);
      out.strides.erase(axis);
      return out;
    },
    .view_scatter = reshape_back,
    .reinterprets_first_input = true,
});

const OpDef& kUnsqueeze = declare({
    .name = "unsqueeze",
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      return std::vector<TypeInfo>{{in[0].dtype, unsqueezed(in[0].shape, a)}};
    },
    .fusion = ir::FusionClass::view,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0).reshape(c.inputs[0].shape()); },
    .view = [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
      int axis = normalize_axis(a.i("axis"), in.shape.size() + 1, "unsqueeze");
      Layout out = in;
      int64_t stride = axis < in.shape.size() ? in.strides[axis] * in.shape[axis] : 1;
      out.shape.insert(axis, 1);
      out.strides.insert(axis, stride);
      return out;
    },
    .view_scatter = reshape_back,
    .reinterprets_first_input = true,
});

// The identity, which compiler passes treat as opaque: no pass looks
// through it, so a value recomputed from a barrier's output is never merged
// (CSE) with the original it recomputes (XLA's optimization barrier). The
// activation-memory policy (kiln/compiler/remat.h) puts one on every input of
// a recomputation.
const OpDef& kOptimizationBarrier = declare({
    .name = "optimization_barrier",
    .infer = [](auto in, const Attrs&) { return std::vector<TypeInfo>{in[0]}; },
    .fusion = ir::FusionClass::opaque,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0); },
    .view = [](const Layout& in, const Attrs&) -> std::optional<Layout> { return in; },
    .view_scatter = [](ViewScatterCall& c) { c.result = c.value; },
    .reinterprets_first_input = true,
});

const OpDef& kCopy = declare({
    .name = "copy",
    .infer = same_as_first,
    .fusion = ir::FusionClass::elementwise,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0); },
});

const OpDef& kSliceScatter = declare({
    .name = "slice_scatter",
    .num_inputs = 2,
    .attrs = kSlice.attrs,
    .infer = [](auto in, const Attrs& a) {
      SliceSpec s = slice_spec(in[0].shape, a);
      Shape expect = in[0].shape;
      expect[s.axis] = s.count;
      KILN_CHECK(in[1].dtype == in[0].dtype && in[1].shape == expect, "slice_scatter: src must be ",
                 dtype_name(in[0].dtype), expect, " to fill the slice, got ", ir::to_string(in[1]));
      return std::vector<TypeInfo>{in[0]};
    },
    .vjp = [](VjpCall& c) {
      const Attrs& a = c.attrs;
      Tensor g = c.cot(0);
      c.grads[0] = slice_scatter(g, zeros_like(c.inputs[1]), a.i("axis"), a.i("start"),
                                 a.i("stop"), a.i("step"));
      c.grads[1] = g.slice(a.i("axis"), a.i("start"), a.i("stop"), a.i("step"));
    },
});

}  // namespace
}  // namespace ops

Tensor optimization_barrier(const Tensor& x) { return apply1(ops::kOptimizationBarrier, {x}, {}); }

Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t axis, int64_t start,
                     int64_t stop, int64_t step) {
  return apply1(ops::kSliceScatter, {base, src},
                {{"axis", axis}, {"start", start}, {"stop", stop}, {"step", step}});
}

}  // namespace kiln
