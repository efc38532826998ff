#include "kiln/models/generate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/rope.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

// The decode step's caches (arguments 2, 3, ...) become its updated caches in place.
std::vector<int> cache_arguments(const CausalLM& model) {
  std::vector<int> args(2 * model.model.layers.size());
  std::iota(args.begin(), args.end(), 2);
  return args;
}

}  // namespace

KVCacheDecoder::KVCacheDecoder(const CausalLM& model, int64_t batch, int64_t max_length,
                               bool replay)
    : model_(model),
      batch_(batch),
      max_length_(max_length == 0 ? model.config().seq_len : max_length),
      device_(model.lm_head_weight().device()),
      prefill_([this](const std::vector<Tensor>& a) { return run_prefill(a); },
               {.name = "generate: prefill"}),
      decode_([this](const std::vector<Tensor>& a) { return run_decode(a); },
              {.name = "generate: decode", .donate = cache_arguments(model), .replay = replay}) {
  KILN_CHECK(batch_ >= 1, "KVCacheDecoder: batch must be >= 1, got ", batch_);
  KILN_CHECK(max_length_ >= 1 && max_length_ <= model.config().seq_len,
             "KVCacheDecoder: max_length must be in [1, ", model.config().seq_len,
             "] (the model's seq_len, as far as its rotary tables reach), got ", max_length_);
}

// ids [B, L] (prompts padded at the end), last [B]: each row's last prompt
// position. Causal attention keeps padding out of every earlier position,
// so the logits at `last` and the cached keys and values below it are the
// unpadded prompt's. Returns the logits there, then each layer's k and v.
std::vector<Tensor> KVCacheDecoder::run_prefill(const std::vector<Tensor>& args) const {
  const Tensor &ids = args[0], &last = args[1];
  const TransformerModel& m = model_.model;
  const int64_t B = ids.dim(0), L = ids.dim(1), dim = model_.config().dim;
  Tensor x = m.embed_tokens.forward(ids);
  RopeTables rope = m.rotary.tables(L, x.dtype(), Tensor(), x.device());
  std::vector<Tensor> out(1);
  AttentionOptions causal;
  causal.causal = true;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const TransformerBlock& block = m.layers[l];
    const nn::Attention& at = block.self_attn;
    nn::Attention::Heads h = at.project(block.input_layernorm.forward(x), rope.cos, rope.sin);
    nn::Routing routing;
    x = block.feed_forward(x + at.output(at.attend(h.q, h.k, h.v, causal)), &routing);
    out.push_back(h.k.contiguous());
    out.push_back(h.v.contiguous());
  }
  Tensor at_last = gather(m.norm.forward(x), 1, last.reshape({B, 1, 1}).expand({B, 1, dim}));
  out[0] = matmul(at_last.reshape({B, dim}), model_.lm_head_weight(), false, true).to(DType::f32);
  return out;
}

// tokens [B, 1] at positions pos [B], then the caches: each row's new key
// and value are written at its position, and its query sees the cache up to
// it. Returns the logits, then the updated caches.
std::vector<Tensor> KVCacheDecoder::run_decode(const std::vector<Tensor>& args) const {
  const Tensor &tokens = args[0], &pos = args[1];
  const TransformerModel& m = model_.model;
  const int64_t B = tokens.dim(0), L = max_length_, dim = model_.config().dim;
  Tensor x = m.embed_tokens.forward(tokens);
  RopeTables rope = m.rotary.tables(1, x.dtype(), pos.reshape({B, 1}), x.device());
  Tensor key_pos = arange(0, double(L), 1, DType::i64, device_);
  Tensor write = eq(key_pos.reshape({1, 1, L, 1}), pos.reshape({B, 1, 1, 1}));
  Tensor allowed = le(key_pos.reshape({1, L}), pos.reshape({B, 1})).reshape({B, 1, L});
  std::vector<Tensor> out(1);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const TransformerBlock& block = m.layers[l];
    const nn::Attention& at = block.self_attn;
    nn::Attention::Heads h = at.project(block.input_layernorm.forward(x), rope.cos, rope.sin);
    Tensor k = where(write, h.k, args[2 + 2 * l]), v = where(write, h.v, args[3 + 2 * l]);
    nn::Routing routing;
    x = block.feed_forward(x + at.output(nn::masked_attention(h.q, k, v, allowed)), &routing);
    out.push_back(k);
    out.push_back(v);
  }
  Tensor last = m.norm.forward(x).reshape({B, dim});
  out[0] = matmul(last, model_.lm_head_weight(), false, true).to(DType::f32);
  return out;
}

std::vector<std::vector<float>> KVCacheDecoder::rows(const Tensor& logits) const {
  std::vector<float> all = logits.to_vector<float>();
  const size_t V = size_t(logits.dim(1));
  std::vector<std::vector<float>> out;
  for (size_t b = 0; b < lengths_.size(); ++b)
    out.emplace_back(all.begin() + long(b * V), all.begin() + long((b + 1) * V));
  return out;
}

std::vector<std::vector<float>> KVCacheDecoder::prefill(
    const std::vector<std::vector<int32_t>>& prompts) {
  KILN_CHECK(!prompts.empty() && int64_t(prompts.size()) <= batch_, "KVCacheDecoder: ",
             prompts.size(), " prompts for a batch of ", batch_);
  std::vector<int32_t> ids(size_t(batch_ * max_length_), 0);
  std::vector<int64_t> last(size_t(batch_), 0);  // unused rows: one padding token
  lengths_.clear();
  for (size_t b = 0; b < prompts.size(); ++b) {
    const int64_t n = int64_t(prompts[b].size());
    KILN_CHECK(n >= 1 && n <= max_length_, "prompt ", b, " has ", n,
               " tokens; the decoder takes 1 to ", max_length_, " (its max_length)");
    std::copy(prompts[b].begin(), prompts[b].end(), ids.begin() + long(b) * max_length_);
    last[b] = n - 1;
    lengths_.push_back(n);
  }
  std::vector<Tensor> out = prefill_({from_vector(ids, {batch_, max_length_}, device_),
                                      from_vector(last, {batch_}, device_)});
  cache_.assign(out.begin() + 1, out.end());
  return rows(out[0]);
}

std::vector<std::vector<float>> KVCacheDecoder::decode(const std::vector<int32_t>& tokens) {
  KILN_CHECK(!lengths_.empty(), "KVCacheDecoder: decode before prefill");
  KILN_CHECK(tokens.size() == lengths_.size(), "KVCacheDecoder: ", tokens.size(),
             " tokens for ", lengths_.size(), " prompts");
  std::vector<int32_t> ids(size_t(batch_), 0);
  std::vector<int64_t> pos(size_t(batch_), 0);  // unused rows rewrite position 0
  for (size_t b = 0; b < tokens.size(); ++b) {
    if (tokens[b] < 0) {  // a finished row rewrites a position it will never read
      pos[b] = std::min(lengths_[b], max_length_ - 1);
      continue;
    }
    KILN_CHECK(lengths_[b] < max_length_, "generation reached the decoder's max_length (",
               max_length_, " tokens) in row ", b,
               ": use a shorter prompt, fewer new tokens or a larger max length");
    ids[b] = tokens[b];
    pos[b] = lengths_[b];
  }
  std::vector<Tensor> args = {from_vector(ids, {batch_, 1}, device_),
                              from_vector(pos, {batch_}, device_)};
  args.insert(args.end(), cache_.begin(), cache_.end());
  cache_.clear();  // donated
  std::vector<Tensor> out = decode_(args);
  cache_.assign(out.begin() + 1, out.end());
  for (size_t b = 0; b < tokens.size(); ++b) lengths_[b] += tokens[b] >= 0;
  return rows(out[0]);
}

void check_sampling(const SamplingOptions& o) {
  KILN_CHECK(o.temperature >= 0 && std::isfinite(o.temperature),
             "temperature must be finite and >= 0, got ", o.temperature);
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

namespace {

// log softmax(logits)[id], in double.
double log_probability(const std::vector<float>& logits, int32_t id) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (float l : logits) total += std::exp(double(l) - top);
  return double(logits[size_t(id)]) - top - std::log(total);
}

}  // namespace

std::vector<Completion> generate(KVCacheDecoder& decoder,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& o, const CompletionCallback& on_token) {
  KILN_CHECK(o.max_new_tokens >= 0, "max_new_tokens must be >= 0, got ", o.max_new_tokens);
  check_sampling(o.sampling);
  std::vector<Completion> out(prompts.size());
  if (o.max_new_tokens == 0) return out;
  std::vector<std::mt19937_64> rngs;
  for (size_t b = 0; b < prompts.size(); ++b) rngs.emplace_back(o.seed + b);
  std::vector<std::vector<float>> logits = decoder.prefill(prompts);
  const int64_t vocab = int64_t(logits[0].size());
  for (const std::vector<int32_t>* ids : {&o.eos_ids, &o.banned_ids})
    for (int32_t id : *ids)
      KILN_CHECK(id >= 0 && id < vocab, "generate: token id ", id,
                 " (an end-of-sequence or banned id) is outside the vocabulary of ", vocab);
  for (;;) {
    std::vector<int32_t> next(prompts.size(), -1);  // -1: the row has finished
    bool running = false;
    for (size_t b = 0; b < prompts.size(); ++b) {
      Completion& c = out[b];
      if (!c.finish_reason.empty()) continue;
      std::vector<float> allowed = logits[b];
      for (int32_t id : o.banned_ids) allowed[size_t(id)] = -std::numeric_limits<float>::infinity();
      const int32_t id = sample_token(allowed, o.sampling, rngs[b]);
      if (std::find(o.eos_ids.begin(), o.eos_ids.end(), id) != o.eos_ids.end()) {
        c.finish_reason = "eos";
        continue;
      }
      c.ids.push_back(id);
      c.logprobs.push_back(log_probability(logits[b], id));
      if (on_token && on_token(b, c))
        c.finish_reason = "stop";
      else if (int64_t(c.ids.size()) == o.max_new_tokens ||
               decoder.lengths()[b] == decoder.max_length())
        c.finish_reason = "length";
      else
        next[b] = id, running = true;
    }
    if (!running) return out;
    logits = decoder.decode(next);
  }
}

}  // namespace kiln
