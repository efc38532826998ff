// What a fused kernel computes, analysed once per body (the IR text in the
// "fused" node's "body" attribute): the iteration space, the buffers it reads
// and writes ("operands"), and the body's nodes as instructions. Every
// target executes a Plan: the CPU's interpreter and code generator, and the
// CUDA code generator.
//
// The iteration space is the shape every body value broadcasts to. For a
// reduction body it is the reduction's input shape, walked in one of two
// orders ("order"), both folding each result in fold.h's order:
//  - rows: the kept axes outermost, the reduced axes innermost, so that the
//    reduced elements of one result are consecutive: flat position
//    o * length + r is element r (row-major over the reduced axes) of
//    result o. Used when the innermost axis is reduced.
//  - columns: when the innermost axis (size >= 8) is kept, it stays
//    innermost and the reduced axes go just outside it: flat position
//    (q * length + r) * columns + b is element r of result q * columns + b,
//    so neighbouring results fold side by side from contiguous memory.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel.h"

namespace kiln::codegen {

// The types values are computed in: float for f32/bf16/f16, double for f64.
enum class Scalar : uint8_t { f32, f64, i32, i64, b8 };
Scalar scalar_of(DType t);

// Calls f(C{}) with the C++ type of `s`.
template <class F>
decltype(auto) visit_scalar(Scalar s, F&& f) {
  switch (s) {
    case Scalar::f32: return f(float{});
    case Scalar::f64: return f(double{});
    case Scalar::i32: return f(int32_t{});
    case Scalar::i64: return f(int64_t{});
    case Scalar::b8: return f(bool{});
  }
  return f(float{});
}

// How an instruction computes. The functor families are the X-macro lists of
// codegen/elementwise_ops.h.
enum class Family : uint8_t {
  numeric_unary, float_unary, logical_unary, numeric_binary, float_binary, compare,
  logical_binary, gelu, where, cast, copy, full, arange
};

struct Instr {
  Family family;
  std::string op;       // the op's name
  std::string functor;  // elementwise_ops.h functor, for the functor families and gelu
  ir::ValueId out = -1;
  std::vector<ir::ValueId> in;
  DType dtype = DType::f32;     // the output's storage type
  DType in_dtype = DType::f32;  // input 0's storage type (the compute type of compare, cast)
  // The result is rounded to the 16-bit output type, as storing it would.
  bool round = false;
  uint64_t constant = 0;  // full: the value (in the compute type), as bits
  int operand = -1;       // arange: the operand holding its values
  double start = 0, step = 0;  // arange: value i is narrow<dtype>(start + i * step)
};

enum class OperandRole : uint8_t { input, constant, output };

// A buffer the kernel reads or writes, broadcast to the iteration space.
struct Operand {
  OperandRole role;
  DType dtype;
  Shape shape;
  ir::ValueId value;  // the body value it holds
};

enum class ReduceKind : uint8_t { sum, mean, max, min };

struct Reduction {
  ReduceKind kind;
  ir::ValueId input;  // the reduced value (iteration shape)
  DType dtype;        // the result's dtype
  int64_t length;     // elements per result
  int64_t results;
  int64_t columns = 0;  // the column walk's innermost kept size; 0: the row walk
};

// An iteration space laid out for a set of operands: dims outermost first,
// size-1 dims dropped and neighbours merged where every operand allows it
// (which keeps the row-major order of positions). Strides in elements.
struct Space {
  Shape shape;
  std::vector<Strides> strides;  // per operand
  friend bool operator==(const Space&, const Space&) = default;
};

struct Plan {
  ir::Graph graph;
  Shape iteration;         // in the body's axis order
  std::vector<int> order;  // axes as walked (reductions: kept, then reduced)
  int64_t numel = 0;       // positions in the iteration space
  std::vector<Operand> operands;  // body inputs first, then constants, then outputs
  int inputs = 0;
  std::vector<Instr> instrs;  // elementwise nodes, in body order
  std::optional<Reduction> reduction;
  // Per body output: its operand, or -1 for the reduction's result.
  std::vector<int> outputs;
  std::vector<std::vector<char>> constant_data;  // arange values (host memory), per constant operand
  Space natural;  // the layout of contiguous operands
};

// Parses and checks a body. kind is the node's "kind" attribute. Errors are
// kiln::Errors that say what in the body cannot be fused, and why.
Plan make_plan(const std::string& body, const std::string& kind);

// Strides of a `shape` tensor broadcast to `iteration` (right-aligned, 0 on
// broadcast axes), in the iteration's axes.
Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& iteration);

// The Space of operands whose strides (in the iteration's axes) are given.
Space make_space(const Plan& p, std::span<const Strides> strides);

// One call's buffers: per operand its first element, and their layout.
struct Binding {
  std::vector<char*> data;
  Space space;
  std::vector<const TensorRef*> results;  // outputs holding the reduction's result
};

// Checks the kernel's buffers against the body's types and binds them.
Binding bind(const Plan& p, std::span<const TensorRef> in, std::span<const TensorRef> out);

}  // namespace kiln::codegen
