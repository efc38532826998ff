// Activation offload's data movement: `offload` copies a value into the
// device's offload pool (host memory) and `reload` copies it back into
// device memory. Both are the identity on the values; the activation
// policy (kiln/compiler/remat.h) places them around the gap between a
// saved activation's last forward use and its first backward use, in the
// forms that run apart from the device's kernels: offload_start and
// reload_start, each completed by a transfer_wait (kiln/runtime/transfer.h).
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

Tensor offload(const Tensor& x);  // a copy of x in the offload pool
Tensor reload(const Tensor& x);   // a copy of x in device memory

}  // namespace kiln
