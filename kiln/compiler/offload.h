// Activation offload (activation_checkpoint.mode = offload): every value a
// backward region reads from a forward region (what the policy `none`
// keeps) is copied into the device's offload pool after its last forward
// use and copied back before the backward needs it, so between the two it
// holds host memory instead of device memory.
//
// Each copy is a transfer (kiln/runtime/transfer.h) that runs beside the
// compute, started by one node and waited for by a later one of the same
// region run, so per-block compile's programs hold their transfers whole:
//  - `offload_start` follows the value's last forward use, and its
//    `transfer_wait` ends that region run (keeping the device copy live
//    until then, as it was before any offload);
//  - `reload_start` opens the backward region run before the one that first
//    reads the value (one block early) and its `transfer_wait` closes that
//    run, so the copy back overlaps the previous block's backward.
// In the backward the device therefore holds about two blocks' saved
// activations at a time; the memory plan (and the peak printed before
// step 1) counts them. A backward's recomputation of a composite op's
// forward moves into the forward first, so that it is not recomputed from
// reloaded copies (offload.cc). The values themselves are unchanged, so
// losses and gradients are bit-identical to `none`.
//
// Under compile.scan_layers the layers' activations are the carries a scan
// keeps for its backward: the scan node marks them offloaded (its
// `offload_from` attribute), so its loop moves them to the offload pool one
// layer at a time, and the backward's scan marks the stacked inputs it reads
// from there (`offloaded_stacked`), which its loop copies back one layer
// ahead (kiln/runtime/scan_body.cc).
#pragma once
#include <cstdint>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

ir::Graph offload_activations(const ir::Graph& g);

// The bytes the graph's offload nodes move to the offload pool.
int64_t offloaded_activation_bytes(const ir::Graph& g);

}  // namespace kiln::compiler
