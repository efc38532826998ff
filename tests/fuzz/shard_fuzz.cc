// Token shard files (data/shards.h): a shard that loads has consistent
// documents, every token below its vocabulary size.
#include "kiln/data/shards.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  kiln::data::TokenCorpus corpus = kiln::data::read_shard(kiln::fuzz::input_file(input));
  int64_t tokens = 0;
  for (int64_t d = 0; d < corpus.num_documents(); ++d) {
    std::vector<int32_t> doc = corpus.document(d);
    kiln::fuzz::check(int64_t(doc.size()) == corpus.document_length(d), "a document's length");
    for (int32_t t : doc) kiln::fuzz::check(t >= 0, "a negative token");
    tokens += int64_t(doc.size());
  }
  kiln::fuzz::check(tokens == corpus.num_tokens(), "the documents do not add up to the tokens");
}
