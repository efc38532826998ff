// CUDA C code generation for fused kernels (and, through one-node bodies,
// for every elementwise op and the reductions sum, mean, max and min): the
// body's instructions as codegen/expr.h writes them, for the CPU's code
// generator too, over the same embedded headers (KILN_HD), so a kernel
// computes the same math per element as the CPU; only the math library
// (CUDA's expf, ... against the C library's) and the fold order of sums
// differ.
//
// Two variants of a plan's kernels, which compute the same bits (the same
// positions per thread, the same fold order; only where the sizes come from
// differs):
//  - specialised: for one layout (the Space of a call's buffers), every size
//    and stride a constant, as the CPU's generated code is for the natural
//    layout. Compiler-made fused nodes in their natural layout run these,
//    where constants pay.
//  - shape_generic: sizes, strides and the launch's counts are kernel
//    arguments (layout_arguments()), block sizes are blockDim, so the source
//    depends only on the body's ops and dtypes, the space's rank and the
//    walk. Eager ops (one-node bodies of every shape) and fused nodes in
//    another layout run these: one compile serves every shape.
// Constants of full nodes are passed at run time in both.
//
// Elementwise bodies: kiln_fused_eval, a grid-stride loop over the space's
// positions (Launch::block threads per block).
// Reduction bodies, in a fixed order with no atomics, so the same inputs give
// the same bits on every run:
//  - kiln_fused_fold (pass 1): each work item is chunk c (kChunk elements)
//    of a result, or of a tile of 32 neighbouring results in the column
//    walk (codegen/plan.h). A thread folds a fixed strided subset of the
//    item's elements in order; the threads then fold as a fixed
//    shared-memory tree. It also stores the body's elementwise outputs.
//  - with more than one chunk per result, kiln_fused_combine (pass 2) folds
//    each result's chunk partials, again strided then as a tree.
// The pass that folds last divides means and stores the result dtype.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/plan.h"

namespace kiln::cuda::fused {

inline constexpr const char* kEvalSymbol = "kiln_fused_eval";
inline constexpr const char* kFoldSymbol = "kiln_fused_fold";
inline constexpr const char* kCombineSymbol = "kiln_fused_combine";

// Elements of one result one pass-1 work item folds at most.
inline constexpr int64_t kChunk = 16384;
// Threads per block of every generated kernel.
inline constexpr int kThreads = 256;

// How a plan's kernels launch: what the generated code and the host agree on.
struct Launch {
  // Elementwise: blocks of kThreads over the positions.
  int64_t positions = 0;
  // Reductions: pass 1 has `blocks` blocks of block_x * block_y threads;
  // chunks > 1 adds pass 2 with blocks2 blocks of block2_x * block2_y,
  // the partials (one accumulator each, acc_bytes) numbering results * chunks.
  int64_t chunks = 1;
  int block_x = kThreads, block_y = 1;
  int64_t blocks = 0;
  int block2_x = kThreads, block2_y = 1;
  int64_t blocks2 = 0;
  int acc_bytes = 0;
};
Launch launch_of(const codegen::Plan& plan);

// The kernel arguments, one struct passed by value: the Binding's operand
// pointers, then (reductions) a pointer per reduction result output and the
// partials' buffer, then the full constants, then (shape_generic) the words
// of layout_arguments().
int pointer_count(const codegen::Plan& plan);

enum class Variant { specialised, shape_generic };

// One call of a plan's kernels over bound buffers, as the host launches it:
// the variant (`natural` in the plan's natural layout, else shape_generic),
// the argument struct's words, and the launches in order (the main kernel,
// then kiln_fused_combine for a reduction of several chunks). Such a
// reduction needs partial_bytes of device scratch, whose address the caller
// writes into args[partials_word].
struct Call {
  struct Grid {
    const char* symbol;  // kEvalSymbol, kFoldSymbol or kCombineSymbol
    int64_t blocks;
    int x, y;  // threads per block
  };
  Variant variant = Variant::shape_generic;
  std::vector<uint64_t> args;
  std::vector<Grid> grids;
  size_t partial_bytes = 0;
  size_t partials_word = 0;
};
// `launch`: launch_of(plan); `constants`: full_constants() of the plan
// (codegen/expr.h). Both are the plan's alone, so callers make them once.
Call make_call(const codegen::Plan& plan, const Launch& launch, const codegen::Binding& b,
               std::span<const uint64_t> constants, Variant natural);

// The CUDA C source of the kernels of `plan` for buffers laid out as `space`
// (shape_generic: only its rank matters). A shape_generic reduction always
// has kiln_fused_combine; the host launches it when there are chunks.
std::string generate_source(const codegen::Plan& plan, const codegen::Space& space, Variant variant);

// The shape_generic kernels' layout arguments for `space`, as 64-bit words:
// the sizes, each operand's strides (max(1, rank) words each), then numel,
// length, results, columns, chunks and tiles (column-walk tiles per row).
std::vector<uint64_t> layout_arguments(const codegen::Plan& plan, const codegen::Space& space);

// The text of the headers generated code embeds (built into libkiln).
std::string_view embedded_headers();

}  // namespace kiln::cuda::fused
