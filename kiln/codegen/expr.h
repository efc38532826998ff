// The target-neutral part of generating source for a Plan: the names of
// storage and compute types, the expression of each instruction, loads and
// stores, and the constants of `full` nodes. The CPU's and CUDA's code
// generators (backend/cpu/fused/codegen.cc, backend/cuda/fused/codegen.cc)
// both emit these, over the same embedded headers (elementwise_ops.h,
// scalar.h, reduce_ops.h), so they compute the same math.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/codegen/plan.h"

namespace kiln::codegen {

const char* storage_type_name(DType t);  // "float", "kiln::bf16", "int64_t", ...
const char* compute_type_name(DType t);  // float for f32/bf16/f16, double for f64, ...

// The local holding a body value in generated code: "v<id>".
std::string value_name(ir::ValueId id);

// What `in` computes from the locals of its inputs, rounded to a 16-bit
// output type as storing it would be (the functor families, where, cast,
// copy; not full or arange, whose values are locals and loads).
std::string expression(const Instr& in);

// A stored element widened to its compute type, and a computed value
// narrowed to storage type t.
std::string load(const std::string& element);
std::string store(DType t, const std::string& value);

// Element `index` (an integer expression) of an arange instruction, in its
// compute type: the value plan.cc's arange_values stores, computed in place.
std::string arange_value(const Instr& in, const std::string& index);

// The values of the plan's full nodes, in instruction order, as bits. They
// are passed at run time rather than written into the source, so that a
// compiler cannot fold math on them (its folding rounds differently from
// the library calls the kernels make).
std::vector<uint64_t> full_constants(const Plan& p);
// Statements declaring the full values' locals from `array[i]` (the bits
// of full_constants()[i]), each line starting with `indent`.
std::string full_declarations(const Plan& p, const std::string& array, const std::string& indent);

// The reduce_ops.h operation of the plan's reduction, for the reduced
// value's compute type.
std::string reduce_op_type(const Plan& p);

// A comment naming the generator and quoting the body, for the top of a
// generated source.
std::string body_comment(const Plan& p, const std::string& generator);

}  // namespace kiln::codegen
