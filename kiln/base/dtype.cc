#include "kiln/base/dtype.h"

#include "kiln/base/error.h"

namespace kiln {

size_t itemsize(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::f64: case DType::i64: return 8;
    case DType::b8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::b8: return "bool";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (name == dtype_name(t)) return t;
  if (name == "float32") return DType::f32;
  if (name == "bfloat16") return DType::bf16;
  if (name == "float16") return DType::f16;
  if (name == "float64") return DType::f64;
  if (name == "int32") return DType::i32;
  if (name == "int64") return DType::i64;
  fail("unknown dtype '", name, "': use one of f32, bf16, f16, f64, i32, i64, bool");
}

}  // namespace kiln
