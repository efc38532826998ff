// Hugging Face tokenizer.json (data/tokenizer.h): a tokenizer that loads
// encodes and decodes, and what it decodes is valid UTF-8.
#include "kiln/data/tokenizer.h"
#include "kiln/data/utf8.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
bool valid_utf8(const std::string& s) {
  return kiln::data::find_invalid_utf8(s) == std::string::npos;
}
}  // namespace

KILN_FUZZ_TARGET(input) {
  kiln::Tokenizer tok = kiln::Tokenizer::from_json_text(kiln::fuzz::as_text(input), "fuzz.json");
  for (const char* text : {"Hello, world! 123  tabs\tand\nlines", "é日本語 🙂 <|end|>", ""}) {
    std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids)
      kiln::fuzz::check(id >= 0 && id < tok.vocab_size(), "encode gave an id outside the vocab");
    kiln::fuzz::check(valid_utf8(tok.decode(ids)), "decode gave invalid UTF-8");
  }
  // Every id in use (the first 4096), decoded together.
  std::vector<int32_t> used;
  for (int32_t id = 0; id < std::min(tok.vocab_size(), 4096); ++id) try {
      tok.id_to_token(id);
      used.push_back(id);
    } catch (const kiln::Error&) {
    }
  kiln::fuzz::check(valid_utf8(tok.decode(used)), "decode gave invalid UTF-8");
}
