// CUDA kernels of the reductions sum, mean, max and min (attributes axes and
// keepdim; result dtypes by their shape rules, as on the CPU): each runs as a
// one-node reduction body through the fused-kernel code generator
// (fused/fused_kernel.h), which folds in a fixed order without atomics.
#include "kiln/backend/cuda/fused/fused_kernel.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {
namespace {

void reduction(const KernelArgs& a) { fused::run_op(a, "reduction"); }
void prepare_reduction(const PrepareArgs& a) { fused::prepare_op(a, "reduction"); }

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "sum", {reduction, true, prepare_reduction}},
    {DeviceKind::cuda, "mean", {reduction, true, prepare_reduction}},
    {DeviceKind::cuda, "max", {reduction, true, prepare_reduction}},
    {DeviceKind::cuda, "min", {reduction, true, prepare_reduction}},
};

}  // namespace
}  // namespace kiln::cuda
