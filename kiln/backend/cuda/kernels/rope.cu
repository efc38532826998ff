// rope and rope_backward on CUDA: the launches of rope.cuh's kernels, over
// cos and sin tables converted to the compute type, which give the CPU's
// bits.
#include "kiln/backend/cuda/kernels/convert.cuh"
#include "kiln/backend/cuda/kernels/rope.cuh"
#include "kiln/backend/cuda/scratch.h"

namespace kiln::cuda {
namespace {

using namespace rope;

RopeDims dims_of(const KernelArgs& a) {
  const Shape& x = a.in[0].shape;
  return {x[0], x[1], x[2], x[3], x[3] / 2, a.in[1].rank() == 3};
}

// Scratch for `tables` table-sized arrays of C, the cos and sin tables
// (inputs 1 and 2) in the compute type at its front; the rest are the
// caller's.
template <class C>
Scratch tables_in_scratch(const KernelArgs& a, int tables) {
  const long long table = a.in[1].numel();
  Scratch scratch(size_t(tables * table) * sizeof(C));
  to_compute(a.in[1], scratch.as<C>(), a.op.name);
  to_compute(a.in[2], scratch.as<C>() + table, a.op.name);
  return scratch;
}

void rope_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const RopeDims r = dims_of(a);
    const Scratch tables = tables_in_scratch<C>(a, 2);
    C* cos = tables.as<C>();
    C* sin = cos + a.in[1].numel();
    launch_n(rope_k<T, C>, a.in[0].numel(), a.in[0].ptr<const T>(), cos, sin, a.out[0].ptr<T>(), r);
  });
}

void rope_backward_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "rope_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const RopeDims r = dims_of(a);
    const long long table = a.in[1].numel();
    const Scratch tables = tables_in_scratch<C>(a, 4);
    C* cos = tables.as<C>();
    C *sin = cos + table, *dcos = sin + table, *dsin = dcos + table;
    const T *x = a.in[0].ptr<const T>(), *g = a.in[3].ptr<const T>();
    launch_n(rope_dx_k<T, C>, a.in[0].numel(), g, cos, sin, a.out[0].ptr<T>(), r);
    launch_n(rope_dtable_k<T, C>, r.table_rows() * r.dim, x, g, dcos, dsin, r);
    from_compute(dcos, a.out[1], "rope_backward");
    from_compute(dsin, a.out[2], "rope_backward");
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "rope", {rope_kernel, false}},
    {DeviceKind::cuda, "rope_backward", {rope_backward_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
