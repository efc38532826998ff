// Row-major coordinates for naive reference loops in tests.
#pragma once
#include <vector>

#include "kiln/base/shape.h"

namespace kiln::test {

// The coordinates of row-major position `flat` in `shape`.
inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> c(size_t(shape.size()));
  for (int d = shape.size() - 1; d >= 0; --d) {
    c[size_t(d)] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

// The row-major position of coordinates `c` in `shape`.
inline int64_t ravel(const std::vector<int64_t>& c, const Shape& shape) {
  int64_t flat = 0;
  for (int d = 0; d < shape.size(); ++d) flat = flat * shape[d] + c[size_t(d)];
  return flat;
}

}  // namespace kiln::test
