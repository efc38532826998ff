// A kernel's declared scratch (Kernel::scratch_bytes), which the expected
// peak memory counts, against what it takes from its device's pool while it
// runs, measured by the allocator.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/runtime/tensor.h"

namespace kiln::test {

struct KernelScratch {
  int64_t declared = 0, measured = 0;
};

// Runs `op` once, alone, on its inputs' device; measured: the pool's peak
// beyond the inputs and the outputs.
KernelScratch scratch_of(const std::string& op, const std::vector<Tensor>& in, const ir::Attrs& attrs);

// Declared bytes are the pool's blocks, each buffer in its size class (64
// bytes, or a quarter power of two above 1 MiB), all taken at once.
void expect_declared(const KernelScratch& s, const std::string& label);

}  // namespace kiln::test
