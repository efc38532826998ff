#include "kiln/ops/shape.h"

#include "kiln/ops/declare.h"

namespace kiln {
namespace ops {
namespace {

const OpDef& kConcat = declare({
    .name = "concat",
    .num_inputs = -1,
    .attrs = {{"axis", AttrKind::int_, int64_t{0}}},
    .infer = [](auto in, const Attrs& a) {
      KILN_CHECK(!in.empty(), "concat: needs at least one tensor");
      KILN_CHECK(!in[0].shape.empty(), "concat: cannot join scalars (", ir::to_string(in[0]),
                 ") along an axis; use stack, or reshape each to [1]");
      int axis = normalize_axis(a.i("axis"), in[0].shape.size(), "concat");
      // Every input's shape with the axis zeroed must equal input 0's.
      auto outside_axis = [axis](Shape s) {
        if (axis < s.size()) s[axis] = 0;
        return s;
      };
      const Shape base = outside_axis(in[0].shape);
      Shape out = base;
      for (size_t i = 0; i < in.size(); ++i) {
        KILN_CHECK(in[i].dtype == in[0].dtype && outside_axis(in[i].shape) == base,
                   "concat: input ", i, " is ", ir::to_string(in[i]), " but input 0 is ",
                   ir::to_string(in[0]),
                   "; all inputs need the same dtype, rank and sizes except on axis ", axis);
        out[axis] += in[i].shape[axis];
      }
      return std::vector<TypeInfo>{{in[0].dtype, out}};
    },
    // One split node, however many inputs (scan's stacked weights have one per layer).
    .vjp = [](VjpCall& c) {
      int64_t axis = c.attrs.i("axis");
      std::vector<int64_t> sizes;
      for (const Tensor& in : c.inputs) sizes.push_back(in.dim(axis));
      std::vector<Tensor> pieces = split(c.cot(0), sizes, axis);
      for (size_t i = 0; i < pieces.size(); ++i) c.grads[i] = pieces[i];
    },
});

const OpDef& kSplit = declare({
    .name = "split",
    .attrs = {{"sizes", AttrKind::ints, std::nullopt}, {"axis", AttrKind::int_, int64_t{0}}},
    .infer = [](auto in, const Attrs& a) {
      int axis = normalize_axis(a.i("axis"), in[0].shape.size(), "split");
      const auto& sizes = a.ints("sizes");
      KILN_CHECK(!sizes.empty(), "split: sizes is empty; give at least one piece");
      int64_t total = 0;
      std::vector<TypeInfo> out;
      for (int64_t n : sizes) {
        KILN_CHECK(n >= 0, "split: negative piece size ", n);
        total += n;
        out.push_back(in[0]);
        out.back().shape[axis] = n;
      }
      KILN_CHECK(total == in[0].shape[axis], "split: sizes add up to ", total, " but axis ", axis,
                 " has size ", in[0].shape[axis]);
      return out;
    },
    // Pieces without a cotangent contribute zeros (c.cot gives them).
    .vjp = [](VjpCall& c) {
      std::vector<Tensor> pieces;
      for (size_t i = 0; i < c.outputs.size(); ++i) pieces.push_back(c.cot(i));
      c.grads[0] = concat(pieces, c.attrs.i("axis"));
    },
});

const OpDef& kPad = declare({
    .name = "pad",
    .attrs = {{"pads", AttrKind::ints, std::nullopt}, {"value", AttrKind::float_, 0.0}},
    .infer = [](auto in, const Attrs& a) {
      const auto& pads = a.ints("pads");
      Shape out = in[0].shape;
      KILN_CHECK(int(pads.size()) == 2 * out.size(), "pad: ", pads.size(),
                 " pad sizes given for a rank-", out.size(), " tensor; give one (before, after) "
                 "pair per dimension");
      for (int d = 0; d < out.size(); ++d) {
        int64_t before = pads[2 * d], after = pads[2 * d + 1];
        KILN_CHECK(before >= 0 && after >= 0, "pad: dimension ", d, " has negative padding (",
                   before, ", ", after, "); to remove elements use slice");
        out[d] += before + after;
      }
      return std::vector<TypeInfo>{{in[0].dtype, out}};
    },
    .vjp = [](VjpCall& c) {
      Tensor g = c.cot(0);
      const auto& pads = c.attrs.ints("pads");
      for (int d = 0; d < g.rank(); ++d)
        if (pads[2 * d] != 0 || pads[2 * d + 1] != 0)
          g = g.slice(d, pads[2 * d], pads[2 * d] + c.inputs[0].dim(d));
      c.grads[0] = g;
    },
});

}  // namespace
}  // namespace ops

Tensor concat(const std::vector<Tensor>& tensors, int64_t axis) {
  return apply1(ops::kConcat, std::span<const Tensor>(tensors), {{"axis", axis}});
}

Tensor stack(const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), "stack: no tensors");
  Shape shape = tensors[0].shape();
  shape.insert(0, int64_t(tensors.size()));
  if (tensors[0].rank() == 0) {  // scalars have no axis to join along
    std::vector<Tensor> rows;
    for (const Tensor& t : tensors) rows.push_back(t.reshape({1}));
    return concat(rows, 0);
  }
  return concat(tensors, 0).reshape(shape);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis) {
  Tensor in[] = {x};
  return apply(ops::kSplit, in, {{"sizes", sizes}, {"axis", axis}});
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads, double value) {
  std::vector<int64_t> flat;
  for (auto [before, after] : pads) flat.push_back(before), flat.push_back(after);
  return apply1(ops::kPad, {x}, {{"pads", flat}, {"value", value}});
}

}  // namespace kiln
