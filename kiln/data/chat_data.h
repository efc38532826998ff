// Chat conversations as training data: rendered with the tokenizer's chat
// template, tokenized as transformers' apply_chat_template(tokenize=True)
// tokenizes them (the rendered text, no special tokens added: the template
// writes its own), with a mask of the tokens that are training targets.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/data/chat_template.h"
#include "kiln/data/corpus.h"
#include "kiln/data/tokenizer.h"

namespace kiln::data {

// The chat template of a tokenizer: the tokenizer_config.json in a
// tokenizer folder, or beside a tokenizer.json. kiln::Error when there is
// none, or it has no chat_template.
ChatTemplate tokenizer_chat_template(const std::string& tokenizer_path);

// Which tokens of a conversation the loss is taken on: the assistant's
// (completion), the rest (prompt), or every token (all).
enum class TrainOn { completion, prompt, all };
TrainOn parse_train_on(std::string_view name);  // kiln::Error naming the valid names

struct EncodedChat {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;  // per id: 1 when it is a training target
};

// An assistant message's tokens run from the end of the generation prompt
// the template renders before it (the conversation so far with
// add_generation_prompt) to the first special token after that (the one
// that closes the turn, e.g. <|eot_id|>, <|im_end|>), inclusive. A template
// that renders a turn differently once later turns follow, or whose
// generation prompt does not end on a token boundary, cannot be masked:
// kiln::Error saying which message.
EncodedChat encode_chat(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                        const nlohmann::ordered_json& messages, TrainOn train_on);

// The special token that closes an assistant turn in this template (e.g.
// <|eot_id|>, <|im_end|>): where a chat reply ends.
int32_t assistant_end_token(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

struct ChatDataOptions {
  TrainOn train_on = TrainOn::completion;
  // A conversation of more tokens is a kiln::Error naming its line (a
  // window holds seq_len + 1 tokens; conversations are never cut).
  int64_t max_tokens = 0;  // 0: no limit
};

// Every conversation ({"messages": [...]} per line; blank lines skipped) of
// the JSONL files, in order, as documents with training-target masks.
// Errors name the file and line.
TokenCorpus read_chat_corpus(const std::vector<std::string>& files, const ChatTemplate& chat_template,
                             const Tokenizer& tokenizer, const ChatDataOptions& options);

}  // namespace kiln::data
