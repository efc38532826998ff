// The shared plan of a fused body (kiln/codegen/plan.h) as the CPU's fused
// kernels use it, and how the CPU splits a reduction plan's walk into work
// items for its fold order (fold.h): per result, chunks of kChunk elements;
// in the column walk, tiles of kTile neighbouring results folded side by
// side.
#pragma once
#include <cstdint>

#include "kiln/backend/cpu/fold.h"
#include "kiln/codegen/plan.h"

namespace kiln::cpu::fused {

using codegen::bind;
using codegen::Binding;
using codegen::Family;
using codegen::Instr;
using codegen::Operand;
using codegen::OperandRole;
using codegen::Plan;
using codegen::ReduceKind;
using codegen::Reduction;
using codegen::Scalar;
using codegen::scalar_of;
using codegen::Space;
using codegen::visit_scalar;

inline constexpr int64_t kTile = 128;

// Per result: ceil(length / kChunk), at least 1.
inline int64_t chunks(const Reduction& r) { return r.length > kChunk ? (r.length + kChunk - 1) / kChunk : 1; }
inline int64_t tiles(const Reduction& r) { return (r.columns + kTile - 1) / kTile; }
// Work items: (result, chunk) for rows, (result row q, tile, chunk) for
// columns; item order is that nesting, row-major.
inline int64_t items(const Reduction& r) {
  return r.columns ? r.results / r.columns * tiles(r) * chunks(r) : r.results * chunks(r);
}

}  // namespace kiln::cpu::fused
