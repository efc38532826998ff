// Grouped matmul on CUDA: the kernels of grouped_matmul.cuh, launched for
// the ops grouped_matmul and grouped_matmul_weight_grad (after planning the
// groups on the device).
#include <cuda_runtime.h>

#include "kiln/backend/cuda/kernels/grouped_matmul.cuh"
#include "kiln/backend/cuda/scratch.h"

namespace kiln::cuda {
namespace {

using namespace grouped;

// The groups of `sizes` over `rows` rows, planned on the device into the
// scratch held here.
struct Planned {
  Scratch scratch;
  Groups groups;
};

Planned plan(const KernelArgs& a, const TensorRef& sizes, long long rows, IndexOp op) {
  KILN_CHECK(sizes.dtype == DType::i32 || sizes.dtype == DType::i64, a.op.name,
             " (CUDA): group_sizes must be i32 or i64, got ", dtype_name(sizes.dtype));
  const long long experts = sizes.shape[0];
  KILN_CHECK(experts <= kMaxExperts, a.op.name, " (CUDA): ", experts, " experts; at most ",
             kMaxExperts, " are supported");
  Scratch scratch(size_t(2 * (experts + 1)) * sizeof(long long));
  long long* buf = scratch.as<long long>();
  Groups g{buf, buf + experts + 1, experts};
  plan_groups_k<<<1, 1, 0, current_stream()>>>(Sizes{sizes.data, sizes.dtype == DType::i64}, g,
                                               rows, index_fault_slot(), int(op));
  KILN_CUDA_CHECK_LAUNCH();
  return {std::move(scratch), g};
}

// The grid's second dimension holds the column tiles, at most 65535 of them.
unsigned column_tiles(long long cols, const char* op) {
  const long long tiles = (cols + kTile - 1) / kTile;
  KILN_CHECK(tiles <= 65535, op, " (CUDA): ", cols, " output columns are more than the ",
             65535LL * kTile, " its grid covers");
  return unsigned(tiles);
}

void grouped(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "grouped_matmul", [&](auto tag) {
    using T = decltype(tag);
    const TensorRef &x = a.in[0], &w = a.in[1], &out = a.out[0];
    const bool tw = a.attrs.b("transpose_w");
    const long long rows = x.shape[0], k = x.shape[1], n = out.shape[1];
    const Planned planned = plan(a, a.in[2], rows, IndexOp::grouped_matmul);
    const Groups& g = planned.groups;
    // Each group adds at most one partial row tile.
    const long long row_tiles = (rows + kTile - 1) / kTile + g.experts;
    if (n > 0 && row_tiles > 0) {
      dim3 grid(unsigned(row_tiles), column_tiles(n, "grouped_matmul"));
      grouped_k<T><<<grid, kThreads, 0, current_stream()>>>(x.ptr<const T>(), w.ptr<const T>(),
                                                            out.ptr<T>(), g, n, k, tw);
      KILN_CUDA_CHECK_LAUNCH();
    }
    launch_n(zero_padding_k<T>, rows * n, out.ptr<T>(), g, n);
  });
}

void weight_grad(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "grouped_matmul_weight_grad", [&](auto tag) {
    using T = decltype(tag);
    const TensorRef &ar = a.in[0], &br = a.in[1], &out = a.out[0];
    const long long rows = ar.shape[0], P = ar.shape[1], Q = br.shape[1], E = out.shape[0];
    const Planned planned = plan(a, a.in[2], rows, IndexOp::grouped_matmul_weight_grad);
    const Groups& g = planned.groups;
    if (E == 0 || P == 0 || Q == 0) return;
    dim3 grid(unsigned(E * ((P + kTile - 1) / kTile)),
              column_tiles(Q, "grouped_matmul_weight_grad"));
    weight_grad_k<T><<<grid, kThreads, 0, current_stream()>>>(ar.ptr<const T>(), br.ptr<const T>(),
                                                              out.ptr<T>(), g, P, Q);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "grouped_matmul", {grouped, false}},
    {DeviceKind::cuda, "grouped_matmul_weight_grad", {weight_grad, false}},
};

}  // namespace
}  // namespace kiln::cuda
