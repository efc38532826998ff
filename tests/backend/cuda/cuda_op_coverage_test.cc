// Every op of the registry runs on CUDA: it has a CUDA kernel, or a
// composite the runtime runs there (eager) or lowers to (compiled
// programs), so kiln never copies to the host behind the user's back; the
// collectives' kernels move device memory over NCCL process groups. Runs
// without a GPU: it checks the kernel registry.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/runtime/kernel.h"

namespace kiln {
namespace {

TEST(CudaOpCoverage, EveryOpHasAKernelOrAComposite) {
  std::vector<std::string> missing;
  for (const ir::OpDef* op : ir::all_ops()) {
    if (find_kernel(DeviceKind::cuda, op->name) || op->composite) continue;
    missing.push_back(op->name);
  }
  EXPECT_TRUE(missing.empty()) << [&] {
    std::string s = "ops with neither a CUDA kernel nor a composite:";
    for (const std::string& m : missing) s += " " + m;
    return s;
  }();
}

// The fused kernels every compiled program leans on.
TEST(CudaOpCoverage, CoreKernelsAreRegistered) {
  for (const char* name : {"fused", "matmul", "copy", "cast", "add", "sum", "gather", "scatter_add",
                           "embedding", "topk", "random_uniform", "softmax", "rms_norm", "rope",
                           "flash_attention", "linear_cross_entropy", "grouped_matmul",
                           "all_reduce", "all_gather_start", "reduce_scatter", "collective_wait"})
    EXPECT_NE(find_kernel(DeviceKind::cuda, name), nullptr) << name;
}

}  // namespace
}  // namespace kiln
