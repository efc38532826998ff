// The activation-memory policy: which forward values of a model region the
// backward keeps, and which it recomputes. It works on a forward + backward
// graph whose nodes carry regions (a transformer block "layers.3" and its
// backward "layers.3.backward", see kiln/ir/region.h):
//   none       every value the backward reads stays alive from the forward;
//   full       a region's backward recomputes every value of the region it
//              reads from the region's inputs (the block input, weights),
//              so only block inputs stay alive across the forward
//              (activation checkpointing per block);
//   selective  the outputs of compute-heavy ops (matmuls, attention, grouped
//              matmuls) stay alive and the rest (norms, activations,
//              elementwise, views) is recomputed: most of the memory of
//              full at a small fraction of its recompute cost;
//   offload    what none keeps, held in the device's offload pool (host
//              memory) between the forward and the backward (offload.h):
//              no recomputation, device memory of about two blocks'
//              activations, and a copy out and back of each.
// Recomputations start from optimization barriers over their inputs, so CSE
// never merges them back into the originals. Recomputed nodes get the same
// ops and attributes (random ops bake their seed and offset), so the results
// are bit-identical to the policy none.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

enum class RematPolicy { none, full, selective, offload };
RematPolicy parse_remat_policy(std::string_view name);  // none | full | selective | offload
const char* remat_policy_name(RematPolicy p);

// Whether `selective` keeps the outputs of `op` (the compute-heavy ops).
bool saved_by_selective(const ir::OpDef& op);

ir::Graph rematerialize(const ir::Graph& g, RematPolicy policy);

// The bytes of the forward regions' values that backward regions read: on a
// graph rematerialize() has rewritten, the activations the policy keeps
// alive on the device from the forward to the backward (values made outside any region,
// such as the embedding's output, are not counted). Nullopt for a graph
// without backward regions (its layers run inside a scan, or it has none).
std::optional<int64_t> kept_activation_bytes(const ir::Graph& g);

}  // namespace kiln::compiler
