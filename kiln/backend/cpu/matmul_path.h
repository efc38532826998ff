// Which path a CPU matmul of each dtype takes (the matmul op, and the fused
// kernels' products through gemm.h). f32 runs oneDNN's matmul on
// fixed blocks of output rows, one thread each (matmul.cc), and f64 a plain
// loop. bf16 runs oneDNN's bf16 primitive where the CPU has bf16 dot
// products (oneDNN dispatches to avx512_core_bf16 or AMX); elsewhere oneDNN
// emulates them far below its f32 speed, so the operands are widened to f32
// (exactly) and multiplied as f32 is, accumulating in f32 as the native path
// does; the product is rounded to bf16 once. f16 takes oneDNN's f16
// primitive where it has one (AVX512-FP16) and is widened likewise elsewhere.
#pragma once
#include <optional>
#include <string>

#include "kiln/base/dtype.h"

namespace kiln::cpu {

enum class MatmulPath { onednn, widened_to_f32, loop };

// KILN_CPU_BF16_MATMUL=native|f32 overrides the automatic bf16 choice.
MatmulPath matmul_path(DType dtype);

// One line for `kiln info` and the run header, e.g.
// "bf16 matmuls: widened to f32 (oneDNN isa avx2 has no bf16 dot products)".
std::string matmul_path_text(DType dtype);

// For tests: forces bf16's path (onednn or widened_to_f32); nullopt restores
// the automatic (or KILN_CPU_BF16_MATMUL's) choice.
void set_bf16_matmul_path(std::optional<MatmulPath> path);

}  // namespace kiln::cpu
