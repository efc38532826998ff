// Chat data as the trainer sees it: each conversation's ids are those of
// transformers' apply_chat_template(messages, tokenize=True) for the Llama 3
// and Qwen3 templates, and the training targets are exactly each assistant
// message and the special token closing it (written out by hand below);
// bad conversations are refused naming the file and line, and data with
// nothing to train on is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/data/chat_data.h"
#include "tests/support/python.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kTokenizers = fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets" / "tokenizers";

const json kConversations = json::parse(R"([
  [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"},
   {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"},
   {"role": "assistant", "content": "4"}],
  [{"role": "user", "content": "Name a colour, é ünïcode."},
   {"role": "assistant", "content": "<think>\nblue\n</think>\n\nBlue, of course."}],
  [{"role": "user", "content": "Only a question?"}]
])");

// The decoded training targets of each conversation, by hand from the templates.
const std::map<std::string, std::vector<std::string>> kTrained = {
    {"llama3", {"Hello!<|eot_id|>4<|eot_id|>",
                "<think>\nblue\n</think>\n\nBlue, of course.<|eot_id|>", ""}},
    // Qwen3 shows an empty thinking block on the last turn after the last
    // question, and strips a message's thinking into that block.
    {"qwen3", {"Hello!<|im_end|><think>\n\n</think>\n\n4<|im_end|>",
               "<think>\nblue\n</think>\n\nBlue, of course.<|im_end|>", ""}},
};

class ChatData : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatData, IdsAreTransformersAndTargetsAreTheAssistantsTurns) {
  const fs::path dir = kTokenizers / GetParam();
  ASSERT_TRUE(fs::exists(dir)) << "missing ../shared/assets";
  const Tokenizer tok = Tokenizer::load(dir.string());
  const ChatTemplate chat = tokenizer_chat_template(dir.string());
  test::TempDir tmp;
  ASSERT_TRUE(test::run_oracle_script(
      "hf_chat_ids.py", cat("--tokenizer '", dir.string(), "' --conversations '",
                            tmp.write("conversations.json", kConversations.dump()), "' --out '",
                            tmp / "ids.json", "'"),
      tmp / "hf.log"));
  const json want = json::parse(std::ifstream(tmp / "ids.json"));
  for (size_t i = 0; i < kConversations.size(); ++i) {
    SCOPED_TRACE(i);
    EncodedChat c = encode_chat(chat, tok, kConversations[i], TrainOn::completion);
    EXPECT_EQ(c.ids, want[i].get<std::vector<int32_t>>());
    std::vector<int32_t> trained, untrained;
    for (size_t t = 0; t < c.ids.size(); ++t) (c.trained[t] ? trained : untrained).push_back(c.ids[t]);
    EXPECT_EQ(tok.decode(trained), kTrained.at(GetParam())[i]);
    EncodedChat p = encode_chat(chat, tok, kConversations[i], TrainOn::prompt);
    for (size_t t = 0; t < c.ids.size(); ++t) EXPECT_NE(p.trained[t], c.trained[t]);
    EncodedChat all = encode_chat(chat, tok, kConversations[i], TrainOn::all);
    EXPECT_EQ(all.trained, std::vector<uint8_t>(c.ids.size(), 1));
  }
}

TEST_P(ChatData, BadConversationsNameTheirLine) {
  const fs::path dir = kTokenizers / GetParam();
  ASSERT_TRUE(fs::exists(dir)) << "missing ../shared/assets";
  const Tokenizer tok = Tokenizer::load(dir.string());
  const ChatTemplate chat = tokenizer_chat_template(dir.string());
  test::TempDir tmp;
  const std::string good = json{{"messages", kConversations[0]}}.dump() + "\n";
  auto read = [&](const std::string& bad_line, int64_t max_tokens = 0) {
    read_chat_corpus({tmp.write("chat.jsonl", good + "\n" + bad_line + "\n")}, chat, tok,
                     {TrainOn::completion, max_tokens});
  };
  test::expect_error([&] { read(R"({"messages": [{"content": "no role"}]})"); }, "chat.jsonl:3: ");
  test::expect_error([&] { read(R"({"messages": [{"content": "no role"}]})"); }, "role");
  test::expect_error([&] { read(R"({"text": "not a chat"})"); }, "\"messages\"");
  test::expect_error([&] { read("{not json"); }, "chat.jsonl:3: not valid JSON");
  test::expect_error([&] { read(R"({"messages": [{"role": "assistant", "content": "first"}]})"); },
                     "message 0 is the assistant's");
  test::expect_error([&] { read(good, 20); }, "more than the 20 a sequence holds");
  TokenCorpus corpus = read_chat_corpus({tmp.write("ok.jsonl", good + good)}, chat, tok, {});
  EXPECT_EQ(corpus.num_documents(), 2);
  // Conversations without an assistant turn, and nothing else: no loss to take.
  const std::string question = json{{"messages", kConversations[2]}}.dump() + "\n";
  test::expect_error(
      [&] { read_chat_corpus({tmp.write("q.jsonl", question + question)}, chat, tok, {}); },
      "no token of the chat data's 2 conversation(s) is trained on");
  EXPECT_EQ(read_chat_corpus({tmp.write("q.jsonl", question + question)}, chat, tok,
                             {TrainOn::all, 0})
                .num_documents(),
            2);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatData, ::testing::Values("llama3", "qwen3"));

}  // namespace
}  // namespace kiln::data
