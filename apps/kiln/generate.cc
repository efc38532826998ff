// `kiln generate`: samples text from a trained checkpoint or a Hugging Face
// model folder, streaming it to stdout as it is decoded.
#include "kiln/models/generate.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>
#include <random>

#include "apps/kiln/commands.h"
#include "kiln/base/error.h"
#include "kiln/train/saved_run.h"

namespace kiln::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint, hf, tokenizer, prompt;
  int64_t max_new_tokens = 100;
  int64_t max_length = 0;  // 0: the prompt and the new tokens, rounded up
  SamplingOptions sampling{0.8, 0, 1.0};
  uint64_t seed = 0;
};

// The bytes of `text` past `printed` that are safe to print: a trailing
// U+FFFD may be a multi-byte character whose remaining tokens are still to
// come, so it waits.
std::string_view printable_suffix(const std::string& text, size_t printed) {
  std::string_view s(text);
  if (s.ends_with("\xEF\xBF\xBD")) s.remove_suffix(3);
  return s.size() > printed ? s.substr(printed) : std::string_view();
}

// The decoder's bound when --max-length is not given: the prompt and the new
// tokens, rounded up to a multiple of 256 so that nearby lengths share
// their programs (in the compile cache, across runs too).
int64_t cache_length(const GenerateArgs& a, size_t prompt, int64_t seq_len) {
  const int64_t need = int64_t(prompt) + std::max<int64_t>(a.max_new_tokens, 1);
  return std::min(seq_len, (need + 255) / 256 * 256);
}

void generate(const GenerateArgs& a) {
  KILN_CHECK(a.checkpoint.empty() != a.hf.empty(),
             "kiln generate needs exactly one of --checkpoint DIR and --hf DIR");
  KILN_CHECK(a.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got ", a.max_new_tokens);
  check_sampling(a.sampling);  // before the model loads, which takes a while
  train::SavedModel m = a.hf.empty() ? train::load_checkpoint_model(a.checkpoint, a.tokenizer)
                                     : train::load_hf_model_dir(a.hf, a.tokenizer);
  const Tokenizer& tok = *m.tokenizer;
  std::vector<int32_t> ids = tok.encode(a.prompt);
  if (auto bos = tok.token_to_id("<|begin_of_text|>")) ids.insert(ids.begin(), *bos);
  KILN_CHECK(!ids.empty(), "the prompt is empty and the tokenizer has no <|begin_of_text|> token");
  std::optional<int32_t> eos = tok.token_to_id("<|end_of_text|>");
  if (!eos) eos = tok.token_to_id("<|endoftext|>");
  const int64_t model_vocab = m.model->config().vocab_size;
  for (int32_t id : ids)
    KILN_CHECK(id < model_vocab, "the prompt has token ", id, " ('", tok.id_to_token(id),
               "'), beyond the model's vocabulary of ", model_vocab,
               ": the tokenizer is not the model's");
  // Ids the tokenizer has no token for (models pad their vocabulary, e.g.
  // Qwen3's 151,936 for 151,669 tokens) are never sampled: they decode to nothing.
  std::vector<int32_t> no_token;
  for (int32_t id = 0; id < model_vocab; ++id)
    if (!tok.has_id(id)) no_token.push_back(id);
  const int64_t seq_len = m.model->config().seq_len;
  KILN_CHECK(int64_t(ids.size()) <= seq_len, "the prompt is ", ids.size(),
             " tokens, more than the model's sequence length of ", seq_len);
  KILN_CHECK(a.max_length >= 0 && a.max_length <= seq_len, "--max-length must be in [0, ",
             seq_len, "] (the model's sequence length), got ", a.max_length);
  KVCacheDecoder decoder(*m.model, 1,
                         a.max_length > 0 ? a.max_length : cache_length(a, ids.size(), seq_len));
  KILN_CHECK(int64_t(ids.size()) <= decoder.max_length(), "the prompt is ", ids.size(),
             " tokens, more than --max-length ", decoder.max_length());
  std::cerr << "generating from " << m.description << std::endl;
  std::mt19937_64 rng(a.seed);
  std::cout << a.prompt << std::flush;
  std::vector<int32_t> generated;
  std::string text;
  size_t printed = 0;
  std::vector<float> logits = decoder.prefill({ids})[0];
  for (int64_t i = 0; i < a.max_new_tokens; ++i) {
    for (int32_t id : no_token) logits[size_t(id)] = -std::numeric_limits<float>::infinity();
    int32_t next = sample_token(logits, a.sampling, rng);
    if (eos && next == *eos) break;
    generated.push_back(next);
    text = tok.decode(generated, /*skip_special_tokens=*/true);
    std::string_view fresh = printable_suffix(text, printed);
    std::cout << fresh << std::flush;
    printed += fresh.size();
    if (i + 1 == a.max_new_tokens || decoder.lengths()[0] >= decoder.max_length()) break;
    logits = decoder.decode({next})[0];
  }
  std::cout << text.substr(std::min(printed, text.size())) << std::endl;
}

}  // namespace

void add_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained model");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "A kiln run: its dump folder, checkpoint folder or a step-N folder");
  cmd->add_option("--hf", args->hf,
                  "A Hugging Face model folder (config.json, safetensors, tokenizer)");
  cmd->add_option("--tokenizer", args->tokenizer, "A tokenizer.json to use instead of the model's");
  cmd->add_option("--prompt", args->prompt, "The text to continue")->required();
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--max-length", args->max_length,
                  "Tokens the decoder's cache holds (prompt and new ones); the prompt is padded "
                  "to it, so every prompt length runs the same compiled programs. 0: the prompt "
                  "and --max-new-tokens rounded up to a multiple of 256, at most the model's "
                  "seq_len")
      ->capture_default_str();
  cmd->add_option("--temperature", args->sampling.temperature, "Sampling temperature; 0 is greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", args->sampling.top_k, "Sample among the k most likely tokens; 0: all")
      ->capture_default_str();
  cmd->add_option("--top-p", args->sampling.top_p, "Nucleus sampling threshold in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Sampling seed")->capture_default_str();
  cmd->callback([args] { generate(*args); });
}

}  // namespace kiln::cli
