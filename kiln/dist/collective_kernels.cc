// Kernels of the IR's collective ops (kiln/ops/collectives.h), for the CPU
// and for CUDA (whose mesh groups are NCCL's, kiln/dist/device_group.h):
// the buffers are the device's, moved by its backend (copies, zeros, casts)
// and by the group. Each looks its mesh_axis up in the current mesh and runs
// the collective on that dimension's process group, holding its device
// queue until the data has arrived; inside a scheduled program
// (kiln/compiler/collective_schedule.h) the "<op>_start" kernels return at
// once and collective_wait holds the queue instead. The process groups move
// flat buffers in rank order, so a collective along an inner dimension is
// packed into (or unpacked from) rank-major order around the transfer
// (unpacked by the wait).
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
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
  KILN_CHECK(g.memory() == a.device.kind, "collective '", a.op.name, "' on ", to_string(a.device),
             " over mesh axis '", axis, "': its ", g.describe(), " moves ",
             g.memory() == DeviceKind::cpu ? "host" : "CUDA",
             " memory; build the mesh on kiln::dist::device_group(world, device)");
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

// A dense buffer on `device` for a chunk-major view that is not dense itself.
// A Storage, so that inside a recorded program it comes from the program's
// private memory, which a replayed CUDA graph may go on writing.
struct Packed {
  std::optional<Storage> storage;  // none when empty
  TensorRef ref;
  Packed(const TensorRef& view, Device d)
      : ref{nullptr, view.dtype, view.shape, contiguous_strides(view.shape)} {
    const size_t bytes = size_t(view.numel()) * itemsize(view.dtype);
    if (bytes) ref.data = storage.emplace(d, bytes).data;
  }
};

void copy(Device d, const TensorRef& dst, const TensorRef& src) {
  find_backend(d.kind)->strided_copy(dst, src);
}

// t's elements dense from `first` on set to zero.
void zero(Device d, const TensorRef& t, int64_t first = 0) {
  const int64_t n = t.numel() - first;
  if (n <= 0) return;
  char* at = static_cast<char*>(t.data) + size_t(first) * itemsize(t.dtype);
  if (d.kind == DeviceKind::cpu) {
    std::memset(at, 0, size_t(n) * itemsize(t.dtype));
    return;
  }
  TensorRef rest{at, t.dtype, Shape{n}, Strides{1}};
  const ir::OpDef& full = ir::get_op("full");
  find_kernel(d.kind, "full")->fn(
      {{}, {&rest, 1}, full.complete_attrs({{"shape", std::vector<int64_t>{n}}, {"value", 0.0},
                                            {"dtype", t.dtype}}),
       full, d});
}

// A collective in flight: its Work, what must outlive the transfer (the
// mesh, packed buffers) and what runs once the data has arrived (unpacking
// into the output).
struct Launched {
  Work work;
  std::shared_ptr<DeviceMesh> mesh;
  std::vector<std::shared_ptr<Packed>> buffers;
  std::function<void()> then;
  uint64_t flow = 0;  // the profile's arrow from the start to the wait (0: none)

  // The device's later work waits for the data where the group can order
  // it on the device (NCCL: the queue thread goes on issuing work); else,
  // or with `host`, the calling thread waits.
  void finish(bool host = false) {
    if (host || !work.wait_on_device()) work.wait();
    if (then) then();
  }
};

Launched launched(Call c, Work w) { return {std::move(w), std::move(c.mesh), {}, {}}; }

Launched all_reduce_launch(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  Work w = c.group->all_reduce(in.data, out.data, in.numel(), in.dtype, reduce_op(a));
  return launched(std::move(c), std::move(w));
}

// Gathers `in` (of out's dtype) into out along the op's gather_dim.
Launched gather_into(const KernelArgs& a, const TensorRef& in, const TensorRef& out) {
  Call c = group_for(a);
  int64_t n = c.group->size();
  TensorRef dst = chunk_major(out, dim_attr(a, "gather_dim", in), n);
  if (dst.contiguous())
    return launched(c, c.group->all_gather(in.data, out.data, in.numel(), in.dtype));
  auto got = std::make_shared<Packed>(dst, a.device);
  Launched l = launched(c, c.group->all_gather(in.data, got->ref.data, in.numel(), in.dtype));
  l.buffers.push_back(got);
  l.then = [dst, got, d = a.device] { copy(d, dst, got->ref); };
  return l;
}

Launched all_gather_launch(const KernelArgs& a) { return gather_into(a, a.in[0], a.out[0]); }

// Cast locally, then gather: the wire carries the narrower dtype, and every
// rank's chunk is rounded once, by its owner (elementwise, so deterministic).
Launched all_gather_cast_launch(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  auto cast = std::make_shared<Packed>(TensorRef{nullptr, a.out[0].dtype, in.shape, {}}, a.device);
  const ir::Attrs to{{"dtype", cast->ref.dtype}};
  find_kernel(a.device.kind, "cast")
      ->fn({{&in, 1}, {&cast->ref, 1}, to, ir::get_op("cast"), a.device});
  Launched l = gather_into(a, cast->ref, a.out[0]);
  l.buffers.push_back(cast);
  return l;
}

Launched reduce_scatter_launch(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  int64_t n = c.group->size();
  TensorRef src = chunk_major(in, dim_attr(a, "scatter_dim", in), n);
  if (src.contiguous())
    return launched(c, c.group->reduce_scatter(in.data, out.data, out.numel(), in.dtype,
                                               reduce_op(a)));
  auto sent = std::make_shared<Packed>(src, a.device);
  copy(a.device, sent->ref, src);
  Launched l = launched(c, c.group->reduce_scatter(sent->ref.data, out.data, out.numel(),
                                                   in.dtype, reduce_op(a)));
  l.buffers.push_back(sent);
  return l;
}

Launched all_to_all_launch(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  int64_t n = c.group->size();
  TensorRef src = chunk_major(in, dim_attr(a, "split_dim", in), n);
  TensorRef dst = chunk_major(out, dim_attr(a, "concat_dim", out), n);
  std::shared_ptr<Packed> sent, got;
  if (!src.contiguous()) {
    sent = std::make_shared<Packed>(src, a.device);
    copy(a.device, sent->ref, src);
  }
  if (!dst.contiguous()) got = std::make_shared<Packed>(dst, a.device);
  std::vector<int64_t> counts(size_t(n), in.numel() / n);
  Launched l = launched(c, c.group->all_to_all(sent ? sent->ref.data : in.data, counts,
                                               got ? got->ref.data : out.data, counts, in.dtype));
  if (sent) l.buffers.push_back(sent);
  if (got) {
    l.buffers.push_back(got);
    l.then = [dst, got, d = a.device] { copy(d, dst, got->ref); };
  }
  return l;
}

// An i64 [n] tensor's values, read on the host.
std::vector<int64_t> rows_of(const TensorRef& t, Device d) {
  std::vector<int64_t> v(size_t(t.numel()));
  if (d.kind == DeviceKind::cpu) std::memcpy(v.data(), t.data, v.size() * sizeof(int64_t));
  else find_backend(d.kind)->copy_to_host(v.data(), t.data, v.size() * sizeof(int64_t), d.index);
  return v;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

// Every rank's send and receive counts, gathered (one small collective):
// every rank finds the same disagreements, so all fail together rather
// than leave some waiting in the exchange.
void check_rows_agree(ProcessGroup& g, const std::vector<int64_t>& send,
                      const std::vector<int64_t>& recv) {
  const size_t n = size_t(g.size());
  std::vector<int64_t> mine = send, all(2 * n * n);
  mine.insert(mine.end(), recv.begin(), recv.end());
  g.all_gather(mine.data(), all.data(), int64_t(2 * n), DType::i64).wait();
  // all[p * 2n + j]: what p sends j; all[p * 2n + n + j]: what p expects from j.
  std::vector<int64_t> who;
  for (size_t q = 0; q < n; ++q) {
    bool wrong = false;
    for (size_t p = 0; p < n; ++p) wrong |= all[q * 2 * n + n + p] != all[p * 2 * n + q];
    if (wrong) who.push_back(g.world_ranks()[q]);
  }
  std::vector<int64_t> sent;  // to this rank, by each
  for (size_t p = 0; p < n; ++p) sent.push_back(all[p * 2 * n + size_t(g.rank())]);
  KILN_CHECK(who.empty(), "all_to_all_v over ", g.describe(), ": the ranks disagree on the rows "
             "they exchange (token counts); world ranks ", list_text(who), " expect other counts than their "
             "peers send. This rank expects rows ", list_text(recv), " from group ranks 0..",
             n - 1, ", which send it ", list_text(sent));
}

Launched all_to_all_v_launch(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  const std::vector<int64_t> send = rows_of(a.in[1], a.device), recv = rows_of(a.in[2], a.device);
  int64_t sent = 0, received = 0;
  for (size_t j = 0; j < send.size(); ++j) {
    KILN_CHECK(send[j] >= 0 && recv[j] >= 0, "all_to_all_v: negative row counts (send ",
               list_text(send), ", receive ", list_text(recv), ")");
    sent += send[j], received += recv[j];
  }
  KILN_CHECK(sent <= in.shape[0], "all_to_all_v: sends ", sent, " rows (", list_text(send),
             ") of an input of ", in.shape[0]);
  KILN_CHECK(received <= out.shape[0], "all_to_all_v: receives ", received, " rows (",
             list_text(recv), ") into an output of ", out.shape[0]);
  check_rows_agree(*c.group, send, recv);
  int64_t row = 1;  // elements per row
  for (int i = 1; i < out.rank(); ++i) row *= out.shape[i];
  std::vector<int64_t> send_elements, recv_elements;
  for (size_t j = 0; j < send.size(); ++j)
    send_elements.push_back(send[j] * row), recv_elements.push_back(recv[j] * row);
  zero(a.device, out, received * row);
  return launched(c, c.group->all_to_all(in.data, send_elements, out.data, recv_elements,
                                         in.dtype));
}

Launched broadcast_launch(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  copy(a.device, out, in);
  return launched(c, c.group->broadcast(out.data, out.numel(), out.dtype, int(a.attrs.i("root"))));
}

// The root gets the sum; the other ranks zeros (the adjoint of broadcast).
Launched reduce_launch(const KernelArgs& a) {
  Call c = group_for(a);
  const TensorRef &in = a.in[0], &out = a.out[0];
  int root = int(a.attrs.i("root"));
  bool zero_out = c.group->rank() != root;
  Launched l = launched(c, c.group->reduce(in.data, out.data, in.numel(), in.dtype, root));
  if (zero_out) l.then = [out, d = a.device] { zero(d, out); };
  return l;
}

// The collectives a compiled program has started and not yet waited for, on
// this (device queue) thread, keyed by their output buffer: a start and its
// wait run in the same program, and the memory plan keeps that buffer to
// itself from the start until past the wait.
std::unordered_map<const void*, Launched>& in_flight() {
  thread_local std::unordered_map<const void*, Launched> m;
  return m;
}

// A failed program's started collectives: finished (their errors dropped)
// before the program's buffers go.
void drain() {
  for (auto& [buffer, l] : in_flight()) try {
      l.finish(/*host=*/true);
    } catch (const std::exception&) {
    }
  in_flight().clear();
}
[[maybe_unused]] const bool drain_registered = (register_in_flight_drain(drain), true);

// Eager and unscheduled programs: launch and wait at once, holding the queue.
template <Launched (*launch)(const KernelArgs&)>
void blocking(const KernelArgs& a) {
  launch(a).finish();
}

// "<op>_start": launch and return; collective_wait finishes it.
template <Launched (*launch)(const KernelArgs&)>
void start(const KernelArgs& a) {
  KILN_CHECK(!in_flight().contains(a.out[0].data), a.op.name, ": a collective started earlier "
             "into the same buffer was never waited for (a compiled program failed between its "
             "start and its wait?)");
  Launched l = launch(a);
  if (profile::active()) {
    l.flow = profile::new_flow_id();
    profile::flow('s', l.flow, "comm", "collective");
  }
  in_flight().emplace(a.out[0].data, std::move(l));
}

void wait_kernel(const KernelArgs& a) {
  const TensorRef &started = a.in[0], &out = a.out[0];
  auto it = in_flight().find(started.data);
  KILN_CHECK(it != in_flight().end(), "collective_wait: no collective was started into this "
             "buffer on this thread; collective_wait must follow its *_start in the same program");
  Launched l = std::move(it->second);
  in_flight().erase(it);
  if (l.flow) profile::flow('f', l.flow, "comm", "collective");
  l.finish();
  // The memory plan aliases the result with the started buffer; where it
  // could not (a result returned in a buffer of its own), copy it.
  if (out.data != started.data) copy(a.device, out, {started.data, out.dtype, out.shape, out.strides});
}

// What all_to_all_v reads on the host (Kernel::reads_on_host).
constexpr const char* kRowCounts =
    "its row counts before it moves the rows (MoE's all_to_all dispatcher; the capacity "
    "dispatcher exchanges static sizes, which a recording holds)";

// The same kernels for the CPU and for CUDA (which has no MPI of its own).
#define KILN_COLLECTIVE_KERNELS(KIND)                                                      \
  {KIND, "all_reduce", {blocking<all_reduce_launch>, false}},                             \
  {KIND, "all_reduce_start", {start<all_reduce_launch>, false}},                          \
  {KIND, "all_gather", {blocking<all_gather_launch>, false}},                             \
  {KIND, "all_gather_start", {start<all_gather_launch>, false}},                          \
  {KIND, "all_gather_cast", {blocking<all_gather_cast_launch>, false}},                   \
  {KIND, "all_gather_cast_start", {start<all_gather_cast_launch>, false}},                \
  {KIND, "reduce_scatter", {blocking<reduce_scatter_launch>, false}},                     \
  {KIND, "reduce_scatter_start", {start<reduce_scatter_launch>, false}},                  \
  {KIND, "all_to_all", {blocking<all_to_all_launch>, false}},                             \
  {KIND, "all_to_all_start", {start<all_to_all_launch>, false}},                          \
  {KIND, "all_to_all_v", {blocking<all_to_all_v_launch>, false, nullptr, kRowCounts}},    \
  {KIND, "broadcast", {blocking<broadcast_launch>, false}},                               \
  {KIND, "broadcast_start", {start<broadcast_launch>, false}},                            \
  {KIND, "reduce", {blocking<reduce_launch>, false}},                                     \
  {KIND, "reduce_start", {start<reduce_launch>, false}},                                  \
  {KIND, "collective_wait", {wait_kernel, false}}
const KernelRegistrar registrations[] = {KILN_COLLECTIVE_KERNELS(DeviceKind::cpu),
                                         KILN_COLLECTIVE_KERNELS(DeviceKind::cuda)};
#undef KILN_COLLECTIVE_KERNELS

}  // namespace
}  // namespace kiln::dist
