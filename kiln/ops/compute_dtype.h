// The dtype the transformer's ops (rms_norm, rope, cross-entropy, attention
// and the fused kernels) compute in: bf16/f16 inputs compute in f32, f64
// inputs in f64, and results round once to the output dtype.
#pragma once
#include "kiln/base/dtype.h"

namespace kiln::ops {

inline DType compute_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace kiln::ops
