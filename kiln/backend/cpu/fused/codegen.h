// C++ code generation for fused kernels: one loop nest over the iteration
// space with every intermediate in a register (where the body calls C
// library math, as exp or tanh, elements go in tiles of 256 and each such
// call gets a loop of its own, so that the arithmetic around it still
// vectorises; values cross between those loops in L1). The source embeds the
// headers that define kiln's scalar math (codegen/elementwise_ops.h, fold.h, ...),
// so a generated kernel computes exactly what the eager kernels and the
// interpreter compute, bit for bit, and needs no kiln source tree.
//
// Generated code is specialised for the plan's natural layout (contiguous
// operands, broadcast inputs with zero strides): every size and stride is a
// constant. A call whose buffers are laid out otherwise runs the interpreter.
// Constants of `full` nodes are passed at run time (codegen/expr.h). The
// expressions, type names and constants come from kiln/codegen/expr.h, which
// the CUDA code generator shares; the loop nests and fold order are the
// CPU's.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backend/cpu/fused/plan.h"

namespace kiln::cpu::fused {

// Entry points of a generated shared object (extern "C"):
//   kiln_fused_eval(data, constants, begin, end): elementwise bodies;
//   kiln_fused_fold(data, constants, item_begin, item_end, dst): reductions;
// with the contracts of driver.h's eval and fold. data holds the Binding's
// operand pointers, constants the values of codegen::full_constants().
using EvalFn = void (*)(char* const* data, const uint64_t* constants, int64_t begin, int64_t end);
using FoldFn = void (*)(char* const* data, const uint64_t* constants, int64_t item_begin,
                        int64_t item_end, void* dst);
inline constexpr const char* kEvalSymbol = "kiln_fused_eval";
inline constexpr const char* kFoldSymbol = "kiln_fused_fold";

// The source of a shared object with the entry point for `plan`.
std::string generate_source(const Plan& plan);

// The text of the headers generated code embeds (built into libkiln).
std::string_view embedded_headers();

}  // namespace kiln::cpu::fused
