// CUDA kernels of every elementwise op (the X-macro lists of
// codegen/elementwise_ops.h, gelu, where, cast) and the creation ops full
// and arange: each runs as a one-node body through the fused-kernel code
// generator (fused/fused_kernel.h), so there is one CUDA code path for
// elementwise math, with the CPU's functors. Dtypes the op does not take are
// refused by its shape rule before a kernel runs.
#include "kiln/backend/cuda/fused/fused_kernel.h"
#include "kiln/codegen/elementwise_ops.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {
namespace {

void elementwise(const KernelArgs& a) { fused::run_op(a, "elementwise"); }
void prepare_elementwise(const PrepareArgs& a) { fused::prepare_op(a, "elementwise"); }

constexpr DeviceKind kCuda = DeviceKind::cuda;
#define KILN_KERNEL(op, F) {kCuda, #op, {elementwise, true, prepare_elementwise}},
const KernelRegistrar registrations[] = {
    KILN_NUMERIC_UNARY_OPS(KILN_KERNEL)
    KILN_FLOAT_UNARY_OPS(KILN_KERNEL)
    KILN_LOGICAL_UNARY_OPS(KILN_KERNEL)
    KILN_NUMERIC_BINARY_OPS(KILN_KERNEL)
    KILN_FLOAT_BINARY_OPS(KILN_KERNEL)
    KILN_COMPARE_OPS(KILN_KERNEL)
    KILN_LOGICAL_BINARY_OPS(KILN_KERNEL)
    {kCuda, "gelu", {elementwise, true, prepare_elementwise}},
    {kCuda, "where", {elementwise, true, prepare_elementwise}},
    {kCuda, "cast", {elementwise, true, prepare_elementwise}},
    {kCuda, "full", {elementwise, false, prepare_elementwise}},
    {kCuda, "arange", {elementwise, false, prepare_elementwise}},
};
#undef KILN_KERNEL

}  // namespace
}  // namespace kiln::cuda
