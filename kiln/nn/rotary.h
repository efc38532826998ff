// Rotary position embedding tables (kiln::rope_tables) for a model: cos and
// sin computed once for the model's sequence length, sliced (or, with
// explicit positions, gathered) per forward call. No parameters.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "kiln/ops/rope.h"

namespace kiln::nn {

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double theta, std::optional<Llama31Scaling> scaling,
                  int64_t max_seq_len);

  // cos and sin in `dtype` for positions 0..seq_len-1 ([seq_len, head_dim])
  // or, given i32/i64 positions [B, S], for those positions ([B, S, head_dim]).
  // On `device` (the input's).
  RopeTables tables(int64_t seq_len, DType dtype, const Tensor& positions = Tensor(),
                    Device device = kCPU) const;

 private:
  const RopeTables& cache_on(Device device) const;

  int64_t head_dim_;
  double theta_;
  std::optional<Llama31Scaling> scaling_;
  // f64 [max_seq_len, head_dim], built eagerly at construction and rounded
  // once to the dtype asked for; copied to another device on its first use.
  RopeTables cache_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int, int>, RopeTables> device_caches_;  // (kind, index) -> copy
};

}  // namespace kiln::nn
