// The reduction of a process group's collectives on the GPU (the NCCL
// backend, kiln/backend/nccl): n ranks' parts combined element by element
// in rank order, as kiln::dist::reduce_in_order does on the host (bf16/f16
// accumulate in f32 and round once, integers wrap, max lets NaN win, avg
// divides the sum by n), so a GPU run reduces to the same bits as one
// process's loop whatever the algorithm that moved the parts.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/base/dtype.h"
#include "kiln/base/reduce_op.h"

namespace kiln::cuda {

// out[i] = parts[0 * stride + i] op ... op parts[(n - 1) * stride + i] for
// i < count, enqueued on `stream`. out may alias the first part.
void rank_ordered_reduce(void* out, const void* parts, int n, int64_t count, int64_t stride,
                         DType dtype, ReduceOp op, cudaStream_t stream);

}  // namespace kiln::cuda
