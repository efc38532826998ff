// The CPU kernels' declared scratch (Kernel::scratch_bytes), which the
// expected peak memory counts, against what each kernel takes from the
// device's pool while it runs, measured by the allocator.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel.h"
#include "tests/support/fused_checks.h"

namespace kiln::test {
namespace {

struct Scratch {
  int64_t declared = 0, measured = 0;
};

// Runs `op` once on the CPU, alone; measured: the pool's peak beyond the
// inputs and the outputs.
Scratch scratch_of(const std::string& op, const std::vector<Tensor>& in, const ir::Attrs& attrs) {
  EagerModeGuard debug(EagerMode::debug);  // the op runs alone
  const ir::OpDef& def = ir::get_op(op);
  const Kernel* kernel = find_kernel(DeviceKind::cpu, op);
  EXPECT_NE(kernel, nullptr) << op;
  EXPECT_NE(kernel->scratch_bytes, nullptr) << op;
  if (!kernel || !kernel->scratch_bytes) return {};
  std::vector<ir::TypeInfo> types;
  for (const Tensor& t : in) types.push_back(t.type());
  const ir::Attrs full = def.complete_attrs(attrs);
  Scratch s;
  s.declared = kernel->scratch_bytes(PrepareArgs{types, full, def, kCPU});

  synchronize();
  const int64_t base = memory_stats().allocated;
  reset_peak_memory();
  std::vector<Tensor> out = apply(def, in, attrs);
  synchronize();
  int64_t outputs = 0;
  for (const Tensor& t : out)
    outputs += int64_t(CachingAllocator::round_size(size_t(t.numel()) * itemsize(t.dtype())));
  s.measured = memory_stats().peak_allocated - base - outputs;
  return s;
}

// Declared bytes are exact; the pool rounds each buffer up to its size
// class (64 bytes, or a quarter power of two above 1 MiB).
void expect_declared(const Scratch& s, const std::string& label) {
  EXPECT_GE(s.measured, s.declared) << label;
  EXPECT_LE(s.measured, s.declared + s.declared / 4 + 4 * 64) << label;
}

std::vector<Tensor> lce_backward_inputs(const LceCase& c, DType dt) {
  std::vector<Tensor> in = lce_inputs(c, dt, 5);
  for (int i = 0; i < 3; ++i) in.push_back(ones({c.rows}));  // lse, dsoft, dtarget (f32)
  return in;
}

TEST(KernelScratch, LinearCrossEntropyDeclaresItsLogitsTiles) {
  // Two vocabulary tiles, the second partial.
  const LceCase c{64, 32, 6000, "mean", -100, 3};
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string label = describe(c, dt);
    Scratch fwd = scratch_of("linear_cross_entropy", lce_inputs(c, dt, 5), lce_attrs(c));
    EXPECT_GE(fwd.declared, c.rows * 4096 * 4) << label << ": one [rows, 4096] f32 tile";
    expect_declared(fwd, label);
    ir::Attrs attrs{{"ignore_index", c.ignore_index}};
    expect_declared(scratch_of("linear_cross_entropy_backward", lce_backward_inputs(c, dt), attrs),
                    label + " backward");
  }
}

TEST(KernelScratch, FlashAttentionDeclaresItsWidenedInputs) {
  const AttentionCase c{2, 4, 2, 64, 64, 64, 64, true, 0, 0};
  const ir::Attrs attrs = attention_attrs(c.head_dim, c.causal, c.window);
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string label = describe(c, dt);
    std::vector<Tensor> in = attention_inputs(c, dt, 7);
    expect_declared(scratch_of("flash_attention", in, attrs), label);
    expect_declared(scratch_of("flash_attention_backward", attention_backward_inputs(in, attrs, 8), attrs),
                    label + " backward");
  }
}

TEST(KernelScratch, GroupedWeightGradDeclaresItsWidenedInputs) {
  const GroupCase c{{5, 0, 12, 7}, 32, 48, 4};
  for (DType dt : {DType::f32, DType::bf16})
    expect_declared(scratch_of("grouped_matmul_weight_grad", weight_grad_inputs(c, dt, 3), {}),
                    describe(c, false, dt));
}

}  // namespace
}  // namespace kiln::test
