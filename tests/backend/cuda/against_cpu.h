// What the CUDA tests share: the one table of how far a CUDA result may be
// from the CPU's, per dtype, the check against it, and the elementwise ops
// by arity (the X-macro lists every backend expands).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/codegen/elementwise_ops.h"
#include "kiln/runtime/tensor.h"
#include "tests/support/support.h"

namespace kiln::test {

inline constexpr Device kCuda0{DeviceKind::cuda, 0};

// |cuda - cpu| <= atol + rtol * |cpu|. Integers and bools are exact. Floats
// differ where the two devices' transcendental functions do (CUDA's expf
// within 2 ulp, the CPU's own f32 exp within 1; log, cos, tanh likewise) and
// where cuBLASLt and oneDNN sum a dot product in different orders; 16-bit
// results can then round to the neighbouring value, and a gradient chain can
// carry that a few ops on.
struct Tolerance {
  double rtol, atol;
};
inline Tolerance cuda_tolerance(DType t) {
  switch (t) {
    case DType::f64: return {1e-12, 1e-12};
    case DType::f32: return {1e-5, 1e-5};
    case DType::f16: return {4e-3, 2e-3};   // ~8 ulp (2^-11 relative)
    case DType::bf16: return {3e-2, 2e-2};  // ~4 ulp (2^-8 relative)
    default: return {0, 0};
  }
}

// A result computed on cuda:0 (and left there) against the CPU's.
inline ::testing::AssertionResult matches_cpu(const Tensor& gpu, const Tensor& cpu) {
  if (gpu.defined() != cpu.defined())
    return ::testing::AssertionFailure() << "defined on one device only";
  if (!gpu.defined()) return ::testing::AssertionSuccess();
  if (gpu.device() != kCuda0)
    return ::testing::AssertionFailure() << "result is on " << to_string(gpu.device())
                                         << ", not " << to_string(kCuda0);
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(gpu.dtype()) << ", the CPU's "
                                         << dtype_name(cpu.dtype());
  Tolerance tol = cuda_tolerance(cpu.dtype());
  return all_close(gpu.to(kCPU), cpu, tol.rtol, tol.atol);
}

inline std::vector<std::string> unary_op_names() {
  std::vector<std::string> ops;
#define KILN_NAME(op, F) ops.push_back(#op);
  KILN_NUMERIC_UNARY_OPS(KILN_NAME)
  KILN_FLOAT_UNARY_OPS(KILN_NAME)
  KILN_LOGICAL_UNARY_OPS(KILN_NAME)
#undef KILN_NAME
  return ops;
}

inline std::vector<std::string> binary_op_names() {
  std::vector<std::string> ops;
#define KILN_NAME(op, F) ops.push_back(#op);
  KILN_NUMERIC_BINARY_OPS(KILN_NAME)
  KILN_FLOAT_BINARY_OPS(KILN_NAME)
  KILN_COMPARE_OPS(KILN_NAME)
  KILN_LOGICAL_BINARY_OPS(KILN_NAME)
#undef KILN_NAME
  return ops;
}

}  // namespace kiln::test
