// Text generation from a CausalLM: incremental decoding with a per-layer
// key/value cache (each step runs only the new tokens and attends to the
// cached keys and values of the earlier ones), and sampling of the next
// token (greedy, temperature, top-k, top-p).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kiln/models/transformer.h"

namespace kiln {

class KVCacheDecoder {
 public:
  // `model` must outlive the decoder.
  explicit KVCacheDecoder(const CausalLM& model);

  // Runs `tokens` at positions [length(), length() + n) and returns the
  // next-token logits after the last of them (as f32). The total length is
  // limited to max_length(); beyond it is a kiln::Error.
  std::vector<float> step(const std::vector<int32_t>& tokens);

  int64_t length() const { return length_; }
  // The model's seq_len: how far its rotary tables reach.
  int64_t max_length() const;

 private:
  const CausalLM& model_;
  std::vector<Tensor> k_, v_;  // per layer: [1, n_kv_heads, length, head_dim]
  int64_t length_ = 0;
};

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  double top_p = 1.0;        // keep the smallest set whose probability reaches p
};

// kiln::Error naming the option out of range.
void check_sampling(const SamplingOptions& options);

// The next token drawn from `logits` under `options` with `rng`.
int32_t sample_token(const std::vector<float>& logits, const SamplingOptions& options,
                     std::mt19937_64& rng);

}  // namespace kiln
