// Collectives over one named axis of a device mesh. They are IR ops with
// shape rules and vjp rules (all_gather <-> reduce_scatter, broadcast <->
// reduce, ...), which is what lets sharded programs be differentiated and
// compiled like any other. Every rank of the group runs the same program;
// "rank r" below is a process's index along the axis. They run only under a
// process group: called in an eager mode without one they raise an error.
#pragma once
#include <string>

#include "kiln/base/reduce_op.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

// The group a collective runs over: the mesh axis's name and its size.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
};


// Every rank gets op(x of every rank). max has no gradient.
Tensor all_reduce(const Tensor& x, const MeshAxis& axis, ReduceOp op = ReduceOp::sum);

// Every rank gets every rank's x concatenated along gather_dim in rank
// order: that dim grows by axis.size.
Tensor all_gather(const Tensor& x, int64_t gather_dim, const MeshAxis& axis);
// The same gather of x cast to `dtype` (op all_gather_cast when it differs
// from x's): its gradient is reduce_scattered in x's dtype, e.g. an f32
// shard gathered in bf16 gets its gradient summed in f32.
Tensor all_gather(const Tensor& x, int64_t gather_dim, const MeshAxis& axis, DType dtype);

// op(x of every rank), cut along scatter_dim into axis.size chunks; rank r
// keeps chunk r. scatter_dim must divide by axis.size. max has no gradient.
Tensor reduce_scatter(const Tensor& x, int64_t scatter_dim, const MeshAxis& axis,
                      ReduceOp op = ReduceOp::sum);

// Each rank cuts x along split_dim into axis.size chunks and sends chunk j
// to rank j; the received chunks are concatenated along concat_dim in rank
// order. split_dim must divide by axis.size.
Tensor all_to_all(const Tensor& x, int64_t split_dim, int64_t concat_dim, const MeshAxis& axis);

// The variable-size exchange (MPI_Alltoallv): x's rows (dim 0) in rank
// order, send_rows[j] of them for rank j (the rest unsent); the result has
// `out_rows` rows, recv_rows[p] from rank p in rank order, then zero rows.
// send_rows and recv_rows are i64 [axis.size] tensors (data, so the shapes
// stay static and the op traces); each rank's recv_rows must be what its
// peers send it, or every rank fails naming the ranks that disagree. Its
// vjp sends the cotangent's rows back (recv_rows and send_rows swapped).
Tensor all_to_all_v(const Tensor& x, const Tensor& send_rows, const Tensor& recv_rows,
                    int64_t out_rows, const MeshAxis& axis);

// Every rank gets rank `root`'s x.
Tensor broadcast(const Tensor& x, int64_t root, const MeshAxis& axis);

// Rank `root` gets the sum of every rank's x, the other ranks zeros: the
// adjoint of broadcast.
Tensor reduce(const Tensor& x, int64_t root, const MeshAxis& axis);

}  // namespace kiln
