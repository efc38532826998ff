// Grouped matmul on the CPU: every expert's product in one kernel. Work is
// a list of (expert, block of rows) tasks run in parallel, each one
// sequential product, so each output element is computed by one thread in a
// fixed order. bf16/f16 operands multiply as they are where the CPU has
// native 16-bit products (gemm.h, f32 accumulation), else are converted to
// f32 per thread: the forward converts a task's rows and its expert's weight
// (tasks of one expert are adjacent, so each thread converts an expert about
// once); the weight gradient, whose tasks share their rows, converts its
// inputs whole. Each task's f32 block is rounded into a 16-bit output.
#include <cstring>
#include <vector>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kRows = 64;  // rows of the output per task

// Offsets of the groups, [E + 1], after checking the sizes sum to at most
// `rows` (the rest are padding).
std::vector<int64_t> group_offsets(const KernelArgs& a, const TensorRef& sizes, int64_t rows) {
  std::vector<int64_t> g = int_values(sizes), off(g.size() + 1, 0);
  for (size_t e = 0; e < g.size(); ++e) {
    KILN_CHECK(g[e] >= 0, a.op.name, ": group_sizes[", e, "] is ", g[e],
               "; group sizes must not be negative");
    off[e + 1] = off[e] + g[e];
  }
  KILN_CHECK(off.back() <= rows, a.op.name, ": group_sizes sum to ", off.back(),
             " but there are only ", rows, " rows");
  return off;
}

struct Task {
  int64_t group, first, count;
};

// Blocks of `block` along each group's extent (ext(e) elements), in order.
template <class Ext>
std::vector<Task> tasks(int64_t groups, int64_t block, Ext ext) {
  std::vector<Task> t;
  for (int64_t e = 0; e < groups; ++e)
    for (int64_t r = 0; r < ext(e); r += block) t.push_back({e, r, std::min(block, ext(e) - r)});
  return t;
}

template <class C, class O>
void grouped(const KernelArgs& a) {
  const TensorRef &xr = a.in[0], &wr = a.in[1], &out = a.out[0];
  const bool tw = a.attrs.b("transpose_w");
  const int64_t rows = xr.shape[0], K = xr.shape[1], E = wr.shape[0];
  const int64_t N = out.shape[1], per_expert = N * K;
  std::vector<int64_t> off = group_offsets(a, a.in[2], rows);
  std::vector<Task> work = tasks(E, kRows, [&](int64_t e) { return off[e + 1] - off[e]; });
  // Padding rows: zeros (all-zero bits in every floating dtype).
  std::memset(static_cast<char*>(out.data) + off.back() * N * itemsize(out.dtype), 0,
              size_t((rows - off.back()) * N) * itemsize(out.dtype));
  const bool as_stored = stored_as<O>(wr.dtype);  // x, w and out share the dtype
  const bool direct = stored_as<C>(out.dtype);
  parallel_for(int64_t(work.size()), kRows * N * K, [&](int64_t begin, int64_t end) {
    std::vector<O> wbuf(as_stored ? 0 : size_t(per_expert)), xbuf(as_stored ? 0 : size_t(kRows * K));
    std::vector<C> ybuf(direct ? 0 : size_t(kRows * N));
    int64_t converted = -1;  // the expert in wbuf
    for (int64_t i = begin; i < end; ++i) {
      const Task& t = work[size_t(i)];
      int64_t row = off[size_t(t.group)] + t.first;
      const O *we, *xs;
      if (as_stored) {
        we = wr.ptr<O>() + t.group * per_expert;
        xs = xr.ptr<O>() + row * K;
      } else {
        if (converted != t.group) load_compute(wr, t.group * per_expert, per_expert, wbuf.data());
        converted = t.group;
        load_compute(xr, row * K, t.count * K, xbuf.data());
        we = wbuf.data();
        xs = xbuf.data();
      }
      C* y = direct ? out.ptr<C>() + row * N : ybuf.data();
      gemm({false, tw, t.count, N, K, K, tw ? K : N, N}, C(1), xs, we, C(0), y);
      if (!direct) store_row(out, row * N, y, t.count * N);
    }
  });
}

template <class C, class O>
void weight_grad(const KernelArgs& a) {
  const TensorRef &ar = a.in[0], &br = a.in[1], &out = a.out[0];
  const int64_t rows = ar.shape[0], P = ar.shape[1], Q = br.shape[1], E = out.shape[0];
  std::vector<int64_t> off = group_offsets(a, a.in[2], rows);
  AsCompute<O> A(ar), B(br);
  const bool direct = stored_as<C>(out.dtype);
  std::vector<Task> work = tasks(E, kRows, [&](int64_t) { return P; });
  // A task's gemm runs over its group's rows: rows / E of them on average.
  parallel_for(int64_t(work.size()), kRows * Q * (rows / std::max<int64_t>(E, 1)),
               [&](int64_t begin, int64_t end) {
    std::vector<C> buf(direct ? 0 : size_t(kRows * Q));
    for (int64_t i = begin; i < end; ++i) {
      const Task& t = work[size_t(i)];
      int64_t r0 = off[size_t(t.group)], n = off[size_t(t.group) + 1] - r0;
      int64_t first = (t.group * P + t.first) * Q;
      C* o = direct ? out.ptr<C>() + first : buf.data();
      gemm({true, false, t.count, Q, n, P, Q, Q}, C(1), A.data() + r0 * P + t.first,
           B.data() + r0 * Q, C(0), o);
      if (!direct) store_row(out, first, o, t.count * Q);
    }
  });
}

void grouped_kernel(const KernelArgs& a) {
  by_operand_type(a.in[0].dtype, [&]<class C, class T, class O>() { grouped<C, O>(a); });
}

void weight_grad_kernel(const KernelArgs& a) {
  by_operand_type(a.in[0].dtype,
                  [&]<class C, class T, class O>() { weight_grad<C, O>(a); });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "grouped_matmul", {grouped_kernel, false}},
    {DeviceKind::cpu, "grouped_matmul_weight_grad",
     {.fn = weight_grad_kernel, .strided_inputs = false, .scratch_bytes = widened_inputs_bytes<0, 1>}},
};

}  // namespace
}  // namespace kiln::cpu
