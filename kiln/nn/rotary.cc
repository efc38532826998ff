#include "kiln/nn/rotary.h"

#include "kiln/base/error.h"
#include "kiln/ops/indexing.h"

namespace kiln::nn {

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double theta,
                                 std::optional<Llama31Scaling> scaling, int64_t max_seq_len)
    : head_dim_(head_dim), theta_(theta), scaling_(scaling),
      cache_(rope_tables(max_seq_len, head_dim, theta, scaling, DType::f64)) {}

// The copies are concrete tensors (Tensor::to copies through the host),
// never values of a trace that happens to be running.
const RopeTables& RotaryEmbedding::cache_on(Device device) const {
  if (device == cache_.cos.device()) return cache_;
  std::lock_guard lock(mu_);
  auto [it, added] = device_caches_.try_emplace({int(device.kind), device.index});
  if (added) it->second = {cache_.cos.to(device), cache_.sin.to(device)};
  return it->second;
}

RopeTables RotaryEmbedding::tables(int64_t seq_len, DType dtype, const Tensor& positions,
                                   Device device) const {
  // Longer than the cache: computed for this call only (a cache filled
  // during a trace would hold values of that trace).
  int64_t cached = cache_.cos.dim(0);
  RopeTables t = cache_on(device);
  if (positions.defined()) {
    KILN_CHECK(positions.rank() == 2 && is_integer(positions.dtype()) &&
                   positions.dim(1) == seq_len,
               "RotaryEmbedding: positions must be i32/i64 [batch, ", seq_len, "], got ",
               dtype_name(positions.dtype()), positions.shape());
    // Positions are checked against the table when the gather runs.
    t = {embedding(t.cos, positions), embedding(t.sin, positions)};
  } else {
    if (seq_len > cached) {
      t = rope_tables(seq_len, head_dim_, theta_, scaling_, DType::f64);
      t = {t.cos.to(device), t.sin.to(device)};
    }
    t = {t.cos.slice(0, 0, seq_len), t.sin.slice(0, 0, seq_len)};
  }
  return {t.cos.to(dtype), t.sin.to(dtype)};
}

}  // namespace kiln::nn
