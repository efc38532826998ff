// Raw text and JSONL documents (data/text_source.h). The first byte picks
// the format and the split; every document is non-empty, valid UTF-8 and a
// piece of the input no longer than it.
#include "kiln/data/text_source.h"
#include "kiln/data/utf8.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  if (input.empty()) return;
  const uint8_t mode = input[0];
  std::string_view contents = kiln::fuzz::as_text(input.subspan(1));
  kiln::data::TextSourceOptions options;
  const bool jsonl = mode & 1;
  options.text_split = kiln::data::TextSplit((mode >> 1) % 4);
  if (mode & 8) options.text_key = "content";
  kiln::data::split_documents(contents, "fuzz", jsonl, options, [&](std::string_view doc) {
    kiln::fuzz::check(!doc.empty(), "an empty document");
    kiln::fuzz::check(kiln::data::find_invalid_utf8(doc) == std::string_view::npos,
                      "a document with invalid UTF-8");
    kiln::fuzz::check(doc.size() <= contents.size(), "a document longer than the input");
  });
}
