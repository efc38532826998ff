// The instruction sets of the CPU kernels: one binary, the best path for the
// CPU it runs on. On x86-64, kiln is built for x86-64-v3 (AVX2, FMA), and
// the kernel sources that loop over tensors (cmake/CpuIsa.cmake lists them)
// are built once more for x86-64-v4 (AVX-512) into a library of their own.
// At start the CPU backend loads that copy when the CPU has AVX-512; its
// kernels register with a higher priority and so replace the baseline ones.
// The copy is loaded only on such CPUs, so its code never runs elsewhere.
// Both give the same bits (vmath.h's functions and fold.h's order do not
// depend on the vector width), as does the generated code (-march=native).
//
// KILN_CPU_ISA: auto (default) as above; x86-64-v3 keeps the baseline
// kernels; x86-64-v4 requires the copy (an error where it cannot load).
#pragma once
#include <string>
#include <string_view>

#include "kiln/runtime/kernel.h"

namespace kiln::cpu {

// The kernels' registrar in the sources built in both variants.
#ifdef KILN_CPU_ISA_COPY
constexpr int kIsaPriority = 1;
#else
constexpr int kIsaPriority = 0;
#endif
struct IsaKernelRegistrar {
  IsaKernelRegistrar(DeviceKind device, std::string_view op, Kernel kernel) {
    register_kernel(device, op, kernel, kIsaPriority);
  }
};

// Which variant the kernels run, e.g. "x86-64-v4 (AVX-512)", and why not a
// better one where the CPU has it but it was not loaded.
std::string kernel_isa();

}  // namespace kiln::cpu
