// Strided layouts as CUDA kernels take them: passed by value, so a kernel
// maps a flat row-major position of a tensor to its element's offset.
#pragma once
#include "kiln/base/shape.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {

struct Layout {
  int rank = 0;
  long long shape[kMaxRank] = {};
  long long strides[kMaxRank] = {};  // in elements; 0 on broadcast dimensions
};

inline Layout layout_of(const Shape& shape, const Strides& strides) {
  Layout l;
  l.rank = shape.size();
  for (int d = 0; d < l.rank; ++d) {
    l.shape[d] = shape[d];
    l.strides[d] = strides[d];
  }
  return l;
}
inline Layout layout_of(const TensorRef& t) { return layout_of(t.shape, t.strides); }

// The element offset of flat row-major position `i`.
__host__ __device__ inline long long offset_of(const Layout& l, long long i) {
  long long off = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const long long n = l.shape[d];
    off += (i % n) * l.strides[d];
    i /= n;
  }
  return off;
}

}  // namespace kiln::cuda
