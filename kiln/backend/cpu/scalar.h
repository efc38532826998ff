// The portable scalar conversions (kiln/codegen/scalar.h) under the names
// the CPU kernels use them by.
#pragma once
#include "kiln/codegen/scalar.h"

namespace kiln::cpu {

using codegen::compute_t;
using codegen::compute_type;
using codegen::is_half_v;
using codegen::narrow;
using codegen::round_to;
using codegen::widen;

}  // namespace kiln::cpu
