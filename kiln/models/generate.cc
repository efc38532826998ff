#include "kiln/models/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/rope.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

// nn::Attention::forward with the keys and values of earlier positions
// taken from (and the new ones appended to) the cache. Causal attention is
// bottom-right aligned, so the new queries see every cached key and the new
// keys up to their own position.
Tensor cached_attention(const nn::Attention& at, const Tensor& x, const RopeTables& tables,
                        Tensor& k_cache, Tensor& v_cache) {
  const nn::AttentionConfig& c = at.config;
  const int64_t B = x.dim(0), S = x.dim(1), hd = c.head_dim;
  Tensor q = at.q_proj.forward(x).reshape({B, S, c.n_heads, hd});
  Tensor k = at.k_proj.forward(x).reshape({B, S, c.n_kv_heads, hd});
  Tensor v = at.v_proj.forward(x).reshape({B, S, c.n_kv_heads, hd});
  if (at.q_norm) q = at.q_norm->forward(q), k = at.k_norm->forward(k);
  q = rope(q, tables.cos, tables.sin).transpose(1, 2);
  k = rope(k, tables.cos, tables.sin).transpose(1, 2);
  v = v.transpose(1, 2);
  k_cache = k_cache.defined() ? concat({k_cache, k}, 2) : k.contiguous();
  v_cache = v_cache.defined() ? concat({v_cache, v}, 2) : v.contiguous();
  AttentionOptions options;
  options.causal = true;
  Tensor o = at.attend(q, k_cache, v_cache, options);
  return at.o_proj.forward(o.transpose(1, 2).reshape({B, S, c.n_heads * hd}));
}

}  // namespace

KVCacheDecoder::KVCacheDecoder(const CausalLM& model)
    : model_(model), k_(model.model.layers.size()), v_(model.model.layers.size()) {}

int64_t KVCacheDecoder::max_length() const { return model_.config().seq_len; }

std::vector<float> KVCacheDecoder::step(const std::vector<int32_t>& tokens) {
  const int64_t n = int64_t(tokens.size());
  KILN_CHECK(n > 0, "KVCacheDecoder: no tokens to run");
  KILN_CHECK(length_ + n <= max_length(), "generation reached the model's sequence length (",
             max_length(), " tokens): use a shorter prompt or fewer new tokens");
  const TransformerModel& m = model_.model;
  Tensor ids = from_vector(tokens, {1, n});
  Tensor positions = arange(double(length_), double(length_ + n)).reshape({1, n});
  Tensor x = m.embed_tokens.forward(ids);
  RopeTables rope = m.rotary.tables(n, x.dtype(), positions);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const TransformerBlock& block = m.layers[l];
    Tensor h =
        x + cached_attention(block.self_attn, block.input_layernorm.forward(x), rope, k_[l], v_[l]);
    Tensor normed = block.post_attention_layernorm.forward(h);
    nn::Routing routing;
    x = h + (block.moe ? block.moe->forward(normed, &routing) : block.mlp->forward(normed));
  }
  Tensor last = m.norm.forward(x).select(1, n - 1);  // [1, dim]
  Tensor logits = matmul(last, model_.lm_head_weight(), false, true);
  length_ += n;
  return logits.to(DType::f32).to_vector<float>();
}

void check_sampling(const SamplingOptions& o) {
  KILN_CHECK(o.temperature >= 0, "temperature must be >= 0, got ", o.temperature);
  KILN_CHECK(o.top_k >= 0, "top-k must be >= 0, got ", o.top_k);
  KILN_CHECK(o.top_p > 0 && o.top_p <= 1, "top-p must be in (0, 1], got ", o.top_p);
}

int32_t sample_token(const std::vector<float>& logits, const SamplingOptions& o,
                     std::mt19937_64& rng) {
  KILN_CHECK(!logits.empty(), "sample_token: no logits");
  check_sampling(o);
  if (o.temperature == 0)
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Tokens by decreasing logit, then the softmax at the temperature over them.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  size_t keep = o.top_k > 0 ? std::min(order.size(), size_t(o.top_k)) : order.size();
  std::vector<double> p(keep);
  const double top = logits[size_t(order[0])];
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += p[i] = std::exp((double(logits[size_t(order[i])]) - top) / o.temperature);
  // Nucleus: the shortest prefix whose probability reaches top_p.
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[i] / total;
    if (cum >= o.top_p) {
      keep = i + 1;
      break;
    }
  }
  std::discrete_distribution<size_t> pick(p.begin(), p.begin() + long(keep));
  return order[pick(rng)];
}

}  // namespace kiln
