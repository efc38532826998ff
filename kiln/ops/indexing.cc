#include "kiln/ops/indexing.h"

#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace ops {
namespace {

void check_index_dtype(const TypeInfo& t, const char* op, const char* what) {
  KILN_CHECK(is_integer(t.dtype), op, ": ", what, " must be i32 or i64, got ", ir::to_string(t),
             "; convert it with .to(DType::i64)");
}

void check_addable(const TypeInfo& x, const TypeInfo& src, const char* op) {
  KILN_CHECK(x.dtype != DType::b8, op, ": bool tensors cannot be added; convert with .to(dtype)");
  KILN_CHECK(src.dtype == x.dtype, op, ": src is ", dtype_name(src.dtype), " but x is ",
             dtype_name(x.dtype), "; convert one with .to(dtype)");
}

// gather's and scatter_add's rule: index has x's rank and fits inside x
// except along `axis` (and inside `src`, when given, everywhere).
int check_gather_index(const TypeInfo& x, const TypeInfo& index, const TypeInfo* src,
                       int64_t axis_attr, const char* op) {
  int axis = normalize_axis(axis_attr, x.shape.size(), op);
  check_index_dtype(index, op, "index");
  KILN_CHECK(index.shape.size() == x.shape.size() && (!src || src->shape.size() == x.shape.size()),
             op, ": index", src ? " and src" : "", " must have x's rank ", x.shape.size(), "; got ",
             ir::to_string(index), src ? cat(" and ", ir::to_string(*src)) : "");
  for (int d = 0; d < x.shape.size(); ++d) {
    KILN_CHECK(d == axis || index.shape[d] <= x.shape[d], op, ": index ", index.shape,
               " is larger than x ", x.shape, " in dimension ", d, " (only axis ", axis,
               " may be larger)");
    KILN_CHECK(!src || index.shape[d] <= src->shape[d], op, ": index ", index.shape,
               " is larger than src ", src->shape, " in dimension ", d);
  }
  return axis;
}

// index_select's rule: `index` is 0-D or 1-D; returns x with `axis` resized to it.
Shape selected_shape(const TypeInfo& x, const TypeInfo& index, int64_t axis_attr, const char* op) {
  int axis = normalize_axis(axis_attr, x.shape.size(), op);
  check_index_dtype(index, op, "index");
  KILN_CHECK(index.shape.size() <= 1, op, ": index must be 1-D, got ", ir::to_string(index),
             "; flatten it with .reshape({-1})");
  Shape out = x.shape;
  out[axis] = index.shape.numel();
  return out;
}

const OpDef& kGather = declare({
    .name = "gather",
    .num_inputs = 2,
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      check_gather_index(in[0], in[1], nullptr, a.i("axis"), "gather");
      return std::vector<TypeInfo>{{in[0].dtype, in[1].shape}};
    },
    .vjp = [](VjpCall& c) {
      c.grads[0] = scatter_add(zeros_like(c.inputs[0]), c.attrs.i("axis"), c.inputs[1], c.cot(0));
    },
});

const OpDef& kScatterAdd = declare({
    .name = "scatter_add",
    .num_inputs = 3,
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      check_addable(in[0], in[2], "scatter_add");
      check_gather_index(in[0], in[1], &in[2], a.i("axis"), "scatter_add");
      return std::vector<TypeInfo>{in[0]};
    },
    .vjp = [](VjpCall& c) {
      Tensor g = c.cot(0);
      const Tensor &index = c.inputs[1], &src = c.inputs[2];
      c.grads[0] = g;
      // src entries outside index's extent are not read: their gradient is 0.
      Tensor gs = gather(g, c.attrs.i("axis"), index);
      if (gs.shape() != src.shape()) {
        std::vector<std::pair<int64_t, int64_t>> pads;
        for (int d = 0; d < src.rank(); ++d) pads.push_back({0, src.dim(d) - index.dim(d)});
        gs = pad(gs, pads);
      }
      c.grads[2] = gs;
    },
});

const OpDef& kIndexSelect = declare({
    .name = "index_select",
    .num_inputs = 2,
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      return std::vector<TypeInfo>{
          {in[0].dtype, selected_shape(in[0], in[1], a.i("axis"), "index_select")}};
    },
    .vjp = [](VjpCall& c) {
      c.grads[0] = index_add(zeros_like(c.inputs[0]), c.attrs.i("axis"), c.inputs[1], c.cot(0));
    },
});

const OpDef& kIndexAdd = declare({
    .name = "index_add",
    .num_inputs = 3,
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      check_addable(in[0], in[2], "index_add");
      Shape expect = selected_shape(in[0], in[1], a.i("axis"), "index_add");
      KILN_CHECK(in[2].shape == expect, "index_add: src must be ", expect,
                 " (x's shape with the axis sized to the index), got ", in[2].shape);
      return std::vector<TypeInfo>{in[0]};
    },
    .vjp = [](VjpCall& c) {
      c.grads[0] = c.cot(0);
      c.grads[2] = index_select(c.cot(0), c.attrs.i("axis"), c.inputs[1]);
    },
});

const OpDef& kEmbedding = declare({
    .name = "embedding",
    .num_inputs = 2,
    .infer = [](auto in, const Attrs&) {
      KILN_CHECK(in[0].shape.size() == 2, "embedding: weight must be [vocab, dim], got ",
                 ir::to_string(in[0]));
      check_index_dtype(in[1], "embedding", "ids");
      KILN_CHECK(in[1].shape.size() < kMaxRank, "embedding: ids of rank ", in[1].shape.size(),
                 " would give a result above the maximum rank ", kMaxRank);
      Shape out = in[1].shape;
      out.push_back(in[0].shape[1]);
      return std::vector<TypeInfo>{{in[0].dtype, out}};
    },
    .vjp = [](VjpCall& c) {
      const Tensor& w = c.inputs[0];
      c.grads[0] = index_add(zeros_like(w), 0, c.inputs[1].reshape({-1}),
                             c.cot(0).reshape({-1, w.dim(1)}));
    },
});

const OpDef& kOneHot = declare({
    .name = "one_hot",
    .attrs = {{"num_classes", AttrKind::int_, std::nullopt},
              {"dtype", AttrKind::dtype, DType::f32}},
    .infer = [](auto in, const Attrs& a) {
      check_index_dtype(in[0], "one_hot", "ids");
      KILN_CHECK(a.i("num_classes") >= 1, "one_hot: num_classes must be at least 1, got ",
                 a.i("num_classes"));
      KILN_CHECK(in[0].shape.size() < kMaxRank, "one_hot: ids of rank ", in[0].shape.size(),
                 " would give a result above the maximum rank ", kMaxRank);
      Shape out = in[0].shape;
      out.push_back(a.i("num_classes"));
      return std::vector<TypeInfo>{{a.dtype("dtype"), out}};
    },
});

}  // namespace
}  // namespace ops

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  return apply1(ops::kGather, {x, index}, {{"axis", axis}});
}

Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  return apply1(ops::kScatterAdd, {x, index, src}, {{"axis", axis}});
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  return apply1(ops::kIndexSelect, {x, index}, {{"axis", axis}});
}

Tensor index_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  return apply1(ops::kIndexAdd, {x, index, src}, {{"axis", axis}});
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  return apply1(ops::kEmbedding, {weight, ids});
}

Tensor one_hot(const Tensor& ids, int64_t num_classes, DType dtype) {
  return apply1(ops::kOneHot, {ids}, {{"num_classes", num_classes}, {"dtype", dtype}});
}

namespace {

// sum over j of sizes[j] where j `before` i (a comparison of j with i), [n].
Tensor running_sum(const Tensor& sizes, Tensor (*before)(const Tensor&, const Tensor&)) {
  Device dev = sizes.device();
  Tensor e = arange(0, double(sizes.dim(0)), 1, DType::i64, dev);
  Tensor upto = before(e.unsqueeze(0), e.unsqueeze(1));  // [i, j]: j before i
  return sum(where(upto, sizes.to(DType::i64).unsqueeze(0), scalar(0, DType::i64, dev)), {1});
}

}  // namespace

Tensor segment_ids(const Tensor& sizes, int64_t rows) {
  Tensor ends = running_sum(sizes, le);
  Tensor r = arange(0, double(rows), 1, DType::i64, sizes.device());
  return sum(le(ends.unsqueeze(0), r.unsqueeze(1)).to(DType::i64), {1});
}

Tensor segment_starts(const Tensor& sizes) { return running_sum(sizes, lt); }

}  // namespace kiln
