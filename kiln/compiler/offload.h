// Activation offload (activation_checkpoint.mode = offload): every value a
// backward region reads from a forward region (what the policy `none`
// keeps) is copied into the device's offload pool after its last forward
// use and copied back before the backward needs it, so between the two it
// holds host memory instead of device memory. The graph gains an `offload`
// node (kiln/ops/offload.h) at the end of the region run of the value's
// last forward use, tagged with that region, and a `reload` node at the
// start of the backward region run before the one that first reads it:
// one block early, so the copy back overlaps the previous block's backward
// where a backend runs copies apart (CUDA), at the cost of holding two
// blocks' activations on the device at a time. A backward's recomputation
// of a composite op's forward moves into the forward first, so that it is
// not recomputed from reloaded copies (offload.cc). The values themselves
// are unchanged, so losses and gradients are bit-identical to `none`.
// Under compile.scan_layers the layers' activations are the carries a scan
// keeps for its backward: the scan node marks them offloaded (its
// `offload_from` attribute), so its loop writes them to the offload pool one
// layer at a time and the backward's loop reads them back one at a time.
#pragma once
#include <cstdint>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

ir::Graph offload_activations(const ir::Graph& g);

// The bytes the graph's offload nodes move to the offload pool.
int64_t offloaded_activation_bytes(const ir::Graph& g);

}  // namespace kiln::compiler
