// Ops that read or write tensors at positions given by integer (i32 or i64)
// index tensors. Indices are checked when the op runs: an index outside
// [0, size) is a kiln::Error naming the op, the index and the valid range
// (in strict eager it surfaces at the next synchronisation point).
// Accumulating ops (scatter_add, index_add) add in a fixed order, so their
// results do not depend on the thread count.
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

// torch.gather: out has index's shape and, for axis 0 of a rank-3 input,
// out[i][j][k] = x[index[i][j][k]][j][k]. index has x's rank and
// index.dim(d) <= x.dim(d) for d != axis.
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);

// torch.scatter_add: x with, for axis 0 of a rank-3 input,
// out[index[i][j][k]][j][k] += src[i][j][k] over every position of index.
// index has x's rank, index.dim(d) <= src.dim(d) for every d and
// index.dim(d) <= x.dim(d) for d != axis. The backward of gather.
Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);

// The entries index[0..n) of `axis` (index is 1-D): x.dim(axis) becomes n.
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);

// x with src's slices added at the entries `index` of `axis` (index 1-D,
// src shaped like index_select(x, axis, index)). The backward of index_select.
Tensor index_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);

// Rows of `weight` [V, D] picked by `ids` (any shape): the result is ids.shape + [D].
Tensor embedding(const Tensor& weight, const Tensor& ids);

// ids.shape + [num_classes], 1 at each id's class and 0 elsewhere.
Tensor one_hot(const Tensor& ids, int64_t num_classes, DType dtype = DType::f32);

// Consecutive segments of sizes[0], sizes[1], ... rows (sizes: 1-D, i32 or
// i64, non-negative): the segment of each of `rows` rows, [rows] i64, with
// sizes.dim(0) for rows past the last segment. Composed of comparisons, so
// it traces (no host read of the sizes); O(rows x segments).
Tensor segment_ids(const Tensor& sizes, int64_t rows);

// Where each segment starts: the exclusive running sum of `sizes` (1-D,
// i32 or i64), [n] i64. O(n^2) comparisons, for the few segments of experts.
Tensor segment_starts(const Tensor& sizes);

}  // namespace kiln
