#include "tests/support/kernel_scratch.h"

#include <gtest/gtest.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel.h"

namespace kiln::test {

KernelScratch scratch_of(const std::string& op, const std::vector<Tensor>& in, const ir::Attrs& attrs) {
  EagerModeGuard debug(EagerMode::debug);  // the op runs alone
  const Device device = in.at(0).device();
  const ir::OpDef& def = ir::get_op(op);
  const Kernel* kernel = find_kernel(device.kind, op);
  EXPECT_NE(kernel, nullptr) << op;
  EXPECT_NE(kernel ? kernel->scratch_bytes : nullptr, nullptr) << op << " declares no scratch";
  if (!kernel || !kernel->scratch_bytes) return {};
  std::vector<ir::TypeInfo> types;
  for (const Tensor& t : in) types.push_back(t.type());
  const ir::Attrs full = def.complete_attrs(attrs);
  KernelScratch s;
  s.declared = kernel->scratch_bytes(PrepareArgs{types, full, def, device});

  synchronize(device);
  const int64_t base = memory_stats(device).allocated;
  reset_peak_memory(device);
  std::vector<Tensor> out = apply(def, in, attrs);
  synchronize(device);
  int64_t outputs = 0;
  for (const Tensor& t : out)
    outputs += int64_t(CachingAllocator::round_size(size_t(t.numel()) * itemsize(t.dtype())));
  s.measured = memory_stats(device).peak_allocated - base - outputs;
  return s;
}

void expect_declared(const KernelScratch& s, const std::string& label) {
  EXPECT_EQ(s.measured, s.declared) << label;
}

}  // namespace kiln::test
