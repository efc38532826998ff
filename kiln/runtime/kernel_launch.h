// Calls a kernel, as a span of the profile when a capture is on (op name,
// its operand types, the flops and bytes of the op's cost rule, and the
// program it is a step of). Every launch goes through here: eager ops
// (`program` null) and each step of a compiled program.
#pragma once
#include <string>

#include "kiln/base/profile.h"
#include "kiln/runtime/kernel.h"

namespace kiln {

void launch_traced(const Kernel& kernel, const KernelArgs& args, const std::string* program);

inline void launch(const Kernel& kernel, const KernelArgs& args,
                   const std::string* program = nullptr) {
  if (profile::active()) return launch_traced(kernel, args, program);
  kernel.fn(args);
}

}  // namespace kiln
