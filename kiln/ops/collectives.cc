// Collective op declarations: attributes, shape rules, costs and vjp rules.
// They have no kernels here: a process group runs them.
#include "kiln/ops/collectives.h"

#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace ops {
namespace {

// Every collective names its group: the mesh axis and its size.
std::vector<ir::AttrSpec> group_attrs(std::vector<ir::AttrSpec> own) {
  own.push_back({"mesh_axis", AttrKind::string, std::nullopt});
  own.push_back({"group_size", AttrKind::int_, std::nullopt});
  return own;
}

MeshAxis axis_of(const Attrs& a) { return {a.s("mesh_axis"), a.i("group_size")}; }

ir::Attrs group_attrs_of(const MeshAxis& axis) {
  return {{"mesh_axis", axis.name}, {"group_size", axis.size}};
}

int64_t check_group(const char* op, const Attrs& a) {
  KILN_CHECK(!a.s("mesh_axis").empty(), op, ": mesh_axis must name a mesh axis");
  KILN_CHECK(a.i("group_size") >= 1, op, ": group_size ", a.i("group_size"), " must be >= 1");
  return a.i("group_size");
}

void check_reduce_op(const char* op, const Attrs& a, const TypeInfo& x) {
  const std::string& r = a.s("op");
  KILN_CHECK(r == "sum" || r == "max" || r == "avg", op, ": unknown reduction '", r,
             "'; use sum, max or avg");
  KILN_CHECK(x.dtype != DType::b8, op, ": cannot reduce bool tensors; convert with .to(dtype)");
  KILN_CHECK(r != "avg" || is_floating(x.dtype), op, ": avg needs a floating tensor, got ",
             ir::to_string(x));
}

void check_root(const char* op, const Attrs& a) {
  int64_t n = check_group(op, a), root = a.i("root");
  KILN_CHECK(root >= 0 && root < n, op, ": root ", root, " is not a rank of a group of ", n);
}

// x's shape with dimension `dim` divided into `parts`, which must divide it.
Shape divided(const char* op, const char* what, const TypeInfo& x, int64_t dim, int64_t parts) {
  int d = normalize_axis(dim, x.shape.size(), op);
  KILN_CHECK(x.shape[d] % parts == 0, op, ": ", what, " ", dim, " of ", ir::to_string(x),
             " has size ", x.shape[d], ", which does not divide into ", parts,
             " equal chunks (group_size); pad it to a multiple of ", parts);
  Shape s = x.shape;
  s[d] /= parts;
  return s;
}

// Bytes each rank sends (ring algorithms): `fraction` of `t`'s bytes; a
// reducing collective also adds that many elements.
ir::Cost comm_cost(const TypeInfo& t, double fraction, bool reduces) {
  double n = double(t.shape.numel()) * fraction;
  return {reduces ? n : 0.0, n * double(itemsize(t.dtype))};
}
double ring_fraction(const Attrs& a) {
  double n = double(a.i("group_size"));
  return (n - 1) / n;
}

[[noreturn]] void no_gradient(const char* op) {
  fail(op, " with op 'max' has no gradient; use sum or avg in differentiated code");
}

// Declares a collective and its "<name>_start" twin: the same collective
// launched asynchronously inside a compiled program (see
// kiln/compiler/collective_schedule.h). The twin has the same attributes,
// shape rule and cost; its output must not be read before a collective_wait
// on it, so it has no vjp and only compiler passes emit it.
const OpDef& declare_collective(OpDef def) {
  OpDef start = def;
  start.name += "_start";
  start.vjp = {};
  declare(std::move(start));
  return declare(std::move(def));
}

// collective_wait(started, sent): blocks until the collective that `started`
// (a *_start output) is the result of has completed, and yields that result
// in the same buffer (the memory plan aliases them). `sent` is the start's
// input: reading it here keeps it live, unchanged, while the transfer reads it.
[[maybe_unused]] const OpDef& kCollectiveWait = declare({
    .name = "collective_wait",
    .num_inputs = 2,
    .infer = [](auto in, const Attrs&) { return std::vector<TypeInfo>{in[0]}; },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto, auto, const Attrs&) { return ir::Cost{}; },
    .side_effects = true,
    .aliases_first_input = true,
});

const OpDef& kAllReduce = declare_collective({
    .name = "all_reduce",
    .attrs = group_attrs({{"op", AttrKind::string, std::string("sum")}}),
    .infer = [](auto in, const Attrs& a) {
      check_group("all_reduce", a);
      check_reduce_op("all_reduce", a, in[0]);
      return std::vector<TypeInfo>{in[0]};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto in, auto, const Attrs& a) {
      return comm_cost(in[0], 2 * ring_fraction(a), true);
    },
    .vjp = [](VjpCall& c) {
      // The adjoint of summing (averaging) over ranks is summing (averaging)
      // the cotangents over ranks.
      if (c.attrs.s("op") == "max") no_gradient("all_reduce");
      ReduceOp op = c.attrs.s("op") == "avg" ? ReduceOp::avg : ReduceOp::sum;
      c.grads[0] = all_reduce(c.cot(0), axis_of(c.attrs), op);
    },
    .side_effects = true,
});

// x's type with dimension gather_dim grown by the group size.
TypeInfo gathered(const char* op, const TypeInfo& x, const Attrs& a) {
  int64_t n = check_group(op, a);
  TypeInfo out = x;
  out.shape[normalize_axis(a.i("gather_dim"), x.shape.size(), op)] *= n;
  return out;
}

const OpDef& kAllGather = declare_collective({
    .name = "all_gather",
    .attrs = group_attrs({{"gather_dim", AttrKind::int_, std::nullopt}}),
    .infer = [](auto in, const Attrs& a) {
      return std::vector<TypeInfo>{gathered("all_gather", in[0], a)};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto, auto out, const Attrs& a) {
      return comm_cost(out[0], ring_fraction(a), false);
    },
    .vjp = [](VjpCall& c) {
      c.grads[0] = reduce_scatter(c.cot(0), c.attrs.i("gather_dim"), axis_of(c.attrs));
    },
    .side_effects = true,
});

// Mixed-precision SimpleFSDP's parameter read: the (f32) shard cast to
// `dtype` (bf16) and gathered, so the wire carries bf16. Its vjp casts the
// cotangent back to the shard's dtype first, so the gradient's
// reduce_scatter sums in f32 (FSDP2's reduce_dtype), not in bf16.
const OpDef& kAllGatherCast = declare_collective({
    .name = "all_gather_cast",
    .attrs = group_attrs({{"gather_dim", AttrKind::int_, std::nullopt},
                          {"dtype", AttrKind::dtype, std::nullopt}}),
    .infer = [](auto in, const Attrs& a) {
      DType to = a.dtype("dtype");
      KILN_CHECK(is_floating(in[0].dtype) && is_floating(to), "all_gather_cast: casts a floating ",
                 "tensor to a floating dtype, got ", ir::to_string(in[0]), " to ", dtype_name(to),
                 "; use all_gather for other dtypes");
      TypeInfo out = gathered("all_gather_cast", in[0], a);
      out.dtype = to;
      return std::vector<TypeInfo>{out};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto, auto out, const Attrs& a) {
      return comm_cost(out[0], ring_fraction(a), false);
    },
    .vjp = [](VjpCall& c) {
      c.grads[0] = reduce_scatter(c.cot(0).to(c.inputs[0].dtype()), c.attrs.i("gather_dim"),
                                  axis_of(c.attrs));
    },
    .side_effects = true,
});

const OpDef& kReduceScatter = declare_collective({
    .name = "reduce_scatter",
    .attrs = group_attrs({{"scatter_dim", AttrKind::int_, std::nullopt},
                          {"op", AttrKind::string, std::string("sum")}}),
    .infer = [](auto in, const Attrs& a) {
      int64_t n = check_group("reduce_scatter", a);
      check_reduce_op("reduce_scatter", a, in[0]);
      Shape s = divided("reduce_scatter", "scatter_dim", in[0], a.i("scatter_dim"), n);
      return std::vector<TypeInfo>{{in[0].dtype, s}};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto in, auto, const Attrs& a) {
      return comm_cost(in[0], ring_fraction(a), true);
    },
    .vjp = [](VjpCall& c) {
      const std::string& op = c.attrs.s("op");
      if (op == "max") no_gradient("reduce_scatter");
      MeshAxis axis = axis_of(c.attrs);
      Tensor g = all_gather(c.cot(0), c.attrs.i("scatter_dim"), axis);
      c.grads[0] = op == "avg" ? g / double(axis.size) : g;
    },
    .side_effects = true,
});

const OpDef& kAllToAll = declare_collective({
    .name = "all_to_all",
    .attrs = group_attrs({{"split_dim", AttrKind::int_, std::nullopt},
                          {"concat_dim", AttrKind::int_, std::nullopt}}),
    .infer = [](auto in, const Attrs& a) {
      int64_t n = check_group("all_to_all", a);
      TypeInfo out{in[0].dtype, divided("all_to_all", "split_dim", in[0], a.i("split_dim"), n)};
      out.shape[normalize_axis(a.i("concat_dim"), in[0].shape.size(), "all_to_all")] *= n;
      return std::vector<TypeInfo>{out};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto in, auto, const Attrs& a) {
      return comm_cost(in[0], ring_fraction(a), false);
    },
    .vjp = [](VjpCall& c) {
      // Sending chunk j to rank j is undone by sending it back: swap the dims.
      c.grads[0] = all_to_all(c.cot(0), c.attrs.i("concat_dim"), c.attrs.i("split_dim"),
                              axis_of(c.attrs));
    },
    .side_effects = true,
});

// One input beyond x's, so it has no "_start" twin: the compiler schedules
// it where it stands.
const OpDef& kAllToAllV = declare({
    .name = "all_to_all_v",
    .num_inputs = 3,
    .attrs = group_attrs({{"out_rows", AttrKind::int_, std::nullopt}}),
    .infer = [](auto in, const Attrs& a) {
      int64_t n = check_group("all_to_all_v", a);
      const TypeInfo& x = in[0];
      KILN_CHECK(!x.shape.empty(), "all_to_all_v: x must have rows (rank >= 1), got ",
                 ir::to_string(x));
      for (int i : {1, 2})
        KILN_CHECK(in[i].dtype == DType::i64 && in[i].shape == Shape{n}, "all_to_all_v: ",
                   i == 1 ? "send_rows" : "recv_rows", " must be an i64 [", n,
                   "] tensor (rows per rank of the group), got ", ir::to_string(in[i]));
      KILN_CHECK(a.i("out_rows") >= 0, "all_to_all_v: out_rows is ", a.i("out_rows"));
      TypeInfo out = x;
      out.shape[0] = a.i("out_rows");
      return std::vector<TypeInfo>{out};
    },
    .fusion = ir::FusionClass::collective,
    // What moves depends on the data: costed as if every row left the rank.
    .cost = [](auto in, auto, const Attrs& a) { return comm_cost(in[0], ring_fraction(a), false); },
    .vjp = [](VjpCall& c) {
      c.grads[0] = all_to_all_v(c.cot(0), c.inputs[2], c.inputs[1], c.inputs[0].dim(0),
                                axis_of(c.attrs));
    },
    .side_effects = true,
});

const OpDef& kBroadcast = declare_collective({
    .name = "broadcast",
    .attrs = group_attrs({{"root", AttrKind::int_, std::nullopt}}),
    .infer = [](auto in, const Attrs& a) {
      check_root("broadcast", a);
      return std::vector<TypeInfo>{in[0]};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto in, auto, const Attrs&) { return comm_cost(in[0], 1, false); },
    .vjp = [](VjpCall& c) {
      c.grads[0] = reduce(c.cot(0), c.attrs.i("root"), axis_of(c.attrs));
    },
    .side_effects = true,
});

const OpDef& kReduce = declare_collective({
    .name = "reduce",
    .attrs = group_attrs({{"root", AttrKind::int_, std::nullopt}}),
    .infer = [](auto in, const Attrs& a) {
      check_root("reduce", a);
      KILN_CHECK(in[0].dtype != DType::b8,
                 "reduce: cannot sum bool tensors; convert with .to(dtype)");
      return std::vector<TypeInfo>{in[0]};
    },
    .fusion = ir::FusionClass::collective,
    .cost = [](auto in, auto, const Attrs&) { return comm_cost(in[0], 1, true); },
    .vjp = [](VjpCall& c) {
      c.grads[0] = broadcast(c.cot(0), c.attrs.i("root"), axis_of(c.attrs));
    },
    .side_effects = true,
});

}  // namespace
}  // namespace ops

Tensor all_reduce(const Tensor& x, const MeshAxis& axis, ReduceOp op) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("op", std::string(reduce_op_name(op)));
  return apply1(ops::kAllReduce, {x}, a);
}

Tensor all_gather(const Tensor& x, int64_t gather_dim, const MeshAxis& axis) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("gather_dim", gather_dim);
  return apply1(ops::kAllGather, {x}, a);
}

Tensor all_gather(const Tensor& x, int64_t gather_dim, const MeshAxis& axis, DType dtype) {
  if (dtype == x.dtype()) return all_gather(x, gather_dim, axis);
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("gather_dim", gather_dim);
  a.set("dtype", dtype);
  return apply1(ops::kAllGatherCast, {x}, a);
}

Tensor reduce_scatter(const Tensor& x, int64_t scatter_dim, const MeshAxis& axis, ReduceOp op) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("scatter_dim", scatter_dim);
  a.set("op", std::string(reduce_op_name(op)));
  return apply1(ops::kReduceScatter, {x}, a);
}

Tensor all_to_all(const Tensor& x, int64_t split_dim, int64_t concat_dim, const MeshAxis& axis) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("split_dim", split_dim);
  a.set("concat_dim", concat_dim);
  return apply1(ops::kAllToAll, {x}, a);
}

Tensor all_to_all_v(const Tensor& x, const Tensor& send_rows, const Tensor& recv_rows,
                    int64_t out_rows, const MeshAxis& axis) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("out_rows", out_rows);
  return apply1(ops::kAllToAllV, {x, send_rows, recv_rows}, a);
}

Tensor broadcast(const Tensor& x, int64_t root, const MeshAxis& axis) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("root", root);
  return apply1(ops::kBroadcast, {x}, a);
}

Tensor reduce(const Tensor& x, int64_t root, const MeshAxis& axis) {
  ir::Attrs a = ops::group_attrs_of(axis);
  a.set("root", root);
  return apply1(ops::kReduce, {x}, a);
}

}  // namespace kiln
