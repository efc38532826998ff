// CPU kernels of the IR's collective ops (kiln/ops/collectives.h). Each
// looks its mesh_axis up in the current mesh and runs the collective on
// that dimension's process group, holding its device queue until the data
// has arrived. The process groups move flat buffers in rank order, so a
// collective along an inner dimension is packed into (or unpacked from)
// rank-major order around the transfer.
#include <cstring>
#include <optional>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/dist/mesh.h"
#include "kiln/runtime/backend.h"

namespace kiln::dist {
namespace {

struct Call {
  std::shared_ptr<DeviceMesh> mesh;  // kept alive for the call
  ProcessGroup* group;
};

Call group_for(const KernelArgs& a) {
  const std::string& axis = a.attrs.s("mesh_axis");
  int64_t n = a.attrs.i("group_size");
  std::shared_ptr<DeviceMesh> mesh = current_mesh();
  KILN_CHECK(mesh, "collective '", a.op.name, "' over mesh axis '", axis,
             "' needs a device mesh, and this process has none: collectives run only under a "
             "process group. Start the run with mpirun and set a mesh "
             "(kiln::dist::set_current_mesh; the trainer builds it from --parallelism.*)");
  ProcessGroup& g = mesh->group(axis);
  KILN_CHECK(g.size() == n, "collective '", a.op.name, "' was built for a group of ", n,
             " along mesh axis '", axis, "', but that axis of the current mesh (",
             mesh->layout().describe(), ") has ", g.size(), " ranks");
  return {std::move(mesh), &g};
}

// The dimension attribute `name`, normalised against t's rank.
int dim_attr(const KernelArgs& a, const char* name, const TensorRef& t) {
  return normalize_axis(a.attrs.i(name), t.rank(), a.op.name.c_str());
}

ReduceOp reduce_op(const KernelArgs& a) {
  const std::string& op = a.attrs.s("op");
  return op == "max" ? ReduceOp::max : op == "avg" ? ReduceOp::avg : ReduceOp::sum;
}

// t (contiguous) cut into n equal chunks along dim, seen as [n, outer,
// chunk]: element [r, o, i] is element (o, i) of chunk r.
TensorRef chunk_major(const TensorRef& t, int dim, int64_t n) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= t.shape[i];
  for (int i = dim + 1; i < t.rank(); ++i) inner *= t.shape[i];
  int64_t chunk = t.shape[dim] / n * inner;
  return {t.data, t.dtype, Shape{n, outer, chunk}, Strides{chunk, n * chunk, 1}};
}

// A dense buffer for a chunk-major view that is not dense itself.
struct Packed {
  std::vector<char> bytes;
  TensorRef ref;
  explicit Packed(const TensorRef& view)
      : bytes(size_t(view.numel()) * itemsize(view.dtype)),
        ref{bytes.data(), view.dtype, view.shape, contiguous_strides(view.shape)} {}
};

void copy(const TensorRef& dst, const TensorRef& src) {
  find_backend(DeviceKind::cpu)->strided_copy(dst, src);
}

void all_reduce_kernel(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  c.group->all_reduce(in.data, out.data, in.numel(), in.dtype, reduce_op(a)).wait();
}

// Gathers `in` (of out's dtype) into out along the op's gather_dim.
void gather_into(const KernelArgs& a, const TensorRef& in, const TensorRef& out) {
  Call c = group_for(a);
  int64_t n = c.group->size();
  TensorRef dst = chunk_major(out, dim_attr(a, "gather_dim", in), n);
  if (dst.contiguous()) {
    c.group->all_gather(in.data, out.data, in.numel(), in.dtype).wait();
    return;
  }
  Packed got(dst);
  c.group->all_gather(in.data, got.ref.data, in.numel(), in.dtype).wait();
  copy(dst, got.ref);
}

void all_gather_kernel(const KernelArgs& a) { gather_into(a, a.in[0], a.out[0]); }

// Cast locally, then gather: the wire carries the narrower dtype, and every
// rank's chunk is rounded once, by its owner (elementwise, so deterministic).
void all_gather_cast_kernel(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  Packed cast(TensorRef{nullptr, a.out[0].dtype, in.shape, {}});
  const ir::Attrs to{{"dtype", cast.ref.dtype}};
  find_kernel(DeviceKind::cpu, "cast")->fn({{&in, 1}, {&cast.ref, 1}, to, ir::get_op("cast")});
  gather_into(a, cast.ref, a.out[0]);
}

void reduce_scatter_kernel(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  int64_t n = c.group->size();
  TensorRef src = chunk_major(in, dim_attr(a, "scatter_dim", in), n);
  if (src.contiguous()) {
    c.group->reduce_scatter(in.data, out.data, out.numel(), in.dtype, reduce_op(a)).wait();
    return;
  }
  Packed sent(src);
  copy(sent.ref, src);
  c.group->reduce_scatter(sent.ref.data, out.data, out.numel(), in.dtype, reduce_op(a)).wait();
}

void all_to_all_kernel(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  int64_t n = c.group->size();
  TensorRef src = chunk_major(in, dim_attr(a, "split_dim", in), n);
  TensorRef dst = chunk_major(out, dim_attr(a, "concat_dim", out), n);
  std::optional<Packed> sent, got;
  if (!src.contiguous()) {
    sent.emplace(src);
    copy(sent->ref, src);
  }
  if (!dst.contiguous()) got.emplace(dst);
  std::vector<int64_t> counts(size_t(n), in.numel() / n);
  c.group->all_to_all(sent ? sent->ref.data : in.data, counts, got ? got->ref.data : out.data,
                      counts, in.dtype)
      .wait();
  if (got) copy(dst, got->ref);
}

void broadcast_kernel(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  std::memcpy(out.data, in.data, size_t(in.numel()) * itemsize(in.dtype));
  c.group->broadcast(out.data, out.numel(), out.dtype, int(a.attrs.i("root"))).wait();
}

// The root gets the sum; the other ranks zeros (the adjoint of broadcast).
void reduce_kernel(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  int root = int(a.attrs.i("root"));
  c.group->reduce(in.data, out.data, in.numel(), in.dtype, root).wait();
  if (c.group->rank() != root) std::memset(out.data, 0, size_t(out.numel()) * itemsize(out.dtype));
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "all_reduce", {all_reduce_kernel, false}},
    {DeviceKind::cpu, "all_gather", {all_gather_kernel, false}},
    {DeviceKind::cpu, "all_gather_cast", {all_gather_cast_kernel, false}},
    {DeviceKind::cpu, "reduce_scatter", {reduce_scatter_kernel, false}},
    {DeviceKind::cpu, "all_to_all", {all_to_all_kernel, false}},
    {DeviceKind::cpu, "broadcast", {broadcast_kernel, false}},
    {DeviceKind::cpu, "reduce", {reduce_kernel, false}},
};

}  // namespace
}  // namespace kiln::dist
