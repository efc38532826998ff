// Text generation from a CausalLM: incremental decoding with a per-layer
// key/value cache (each step runs only the new tokens and attends to the
// cached keys and values of the earlier ones), and sampling of the next
// token (greedy, temperature, top-k, top-p).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <random>
#include <vector>

#include "kiln/models/transformer.h"
#include "kiln/runtime/compile.h"

namespace kiln {

// Decoding with shapes bounded once: a cache of max_length positions per
// layer for `batch` rows. Prompts of any length up to the bound are padded
// to it and every row's logical length is a runtime input (positions, the
// cache write and the attention mask are computed from it inside the
// program), so prefill and decode compile one program each, whatever the
// prompt lengths and however long the generation. Rows are independent:
// padding changes no row's logits (MoE layers route each token on its own).
class KVCacheDecoder {
 public:
  // `model` must outlive the decoder. max_length 0: the model's seq_len, as
  // far as its rotary tables reach. `replay`: the decode step's program is
  // recorded once and replayed (a CUDA graph per token on a GPU).
  explicit KVCacheDecoder(const CausalLM& model, int64_t batch = 1, int64_t max_length = 0,
                          bool replay = false);
  KVCacheDecoder(const KVCacheDecoder&) = delete;  // its programs call back into this object
  KVCacheDecoder& operator=(const KVCacheDecoder&) = delete;

  // Starts over with 1..batch() prompts of 1..max_length() tokens, one per
  // row; returns each prompt's next-token logits (f32, one vector per prompt).
  std::vector<std::vector<float>> prefill(const std::vector<std::vector<int32_t>>& prompts);
  // One more token per prompt, each at its row's next position; a row at
  // max_length() is a kiln::Error. A negative token leaves its row as it is
  // (a finished row of a batch): its logits are meaningless.
  std::vector<std::vector<float>> decode(const std::vector<int32_t>& tokens);

  // Tokens in the cache, per prompt.
  const std::vector<int64_t>& lengths() const { return lengths_; }
  int64_t max_length() const { return max_length_; }
  int64_t batch() const { return batch_; }
  // Signatures compiled so far: 2 once both have run, for any lengths.
  size_t num_programs() const { return prefill_.num_signatures() + decode_.num_signatures(); }

 private:
  std::vector<Tensor> run_prefill(const std::vector<Tensor>& args) const;
  std::vector<Tensor> run_decode(const std::vector<Tensor>& args) const;
  std::vector<std::vector<float>> rows(const Tensor& logits) const;

  const CausalLM& model_;
  int64_t batch_, max_length_;
  Device device_;
  CompiledFunction prefill_, decode_;
  std::vector<Tensor> cache_;     // per layer k then v: [batch, n_kv_heads, max_length, head_dim]
  std::vector<int64_t> lengths_;  // per prompt
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

struct GenerationOptions {
  int64_t max_new_tokens = 100;
  SamplingOptions sampling;
  // End-of-sequence ids: a row stops when it draws one (it is not part of
  // the completion).
  std::vector<int32_t> eos_ids;
  // Ids never drawn, e.g. those the tokenizer has no token for.
  std::vector<int32_t> banned_ids;
  // Row b draws with std::mt19937_64(seed + b): a prompt's completion does
  // not depend on the others in its batch.
  uint64_t seed = 0;
};

struct Completion {
  std::vector<int32_t> ids;      // the tokens drawn, without an end-of-sequence id
  std::vector<double> logprobs;  // the model's log-probability of each (temperature 1, all ids)
  std::string finish_reason;     // "eos", "stop" (the callback said so) or "length"
};

// Called after each token a row draws; true stops the row (e.g. at a stop string).
using CompletionCallback = std::function<bool(size_t row, const Completion& so_far)>;

// Continues each prompt (at most decoder.batch() of them) until it draws an
// end-of-sequence id, the callback stops it, it has max_new_tokens tokens or
// the decoder's cache is full.
std::vector<Completion> generate(KVCacheDecoder& decoder,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options,
                                 const CompletionCallback& on_token = {});

}  // namespace kiln
