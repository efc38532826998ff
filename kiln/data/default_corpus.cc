#include "kiln/data/default_corpus.h"

#include <filesystem>

#include "kiln/base/error.h"

namespace kiln::data {
namespace {

// The Debian packages `fortunes` and `fortunes-min`: about 2.6 MB of short
// English texts (quotations, jokes, poems, definitions) in UTF-8, one
// fortune per document, separated by lines holding "%". The list is fixed so
// that the corpus is the same on every machine (other packages, such as
// fortunes in other languages, install more files in the same folder); the
// drawings ("art", "ascii-art") are left out.
constexpr const char* kDir = "/usr/share/games/fortunes";
constexpr const char* kFiles[] = {
    "computers", "cookie",        "debian",    "definitions", "disclaimer", "drugs",
    "education", "ethnic",        "food",      "fortunes",    "goedel",     "humorists",
    "kids",      "knghtbrd",      "law",       "linux",       "linuxcookie", "literature",
    "love",      "magic",         "medicine",  "men-women",   "miscellaneous", "news",
    "paradoxum", "people",        "perl",      "pets",        "platitudes", "politics",
    "riddles",   "science",       "songs-poems", "sports",    "startrek",   "tao",
    "wisdom",    "work",          "zippy",
};

}  // namespace

DefaultCorpus default_corpus() {
  DefaultCorpus corpus;
  std::vector<std::string> missing;
  for (const char* name : kFiles) {
    std::string path = std::string(kDir) + "/" + name;
    std::error_code ec;
    (std::filesystem::is_regular_file(path, ec) ? corpus.paths : missing).push_back(path);
  }
  KILN_CHECK(missing.empty(), "the default training corpus is not installed (", missing.size(),
             " of its files are missing, e.g. '", missing.empty() ? "" : missing.front(),
             "'): run scripts/setup.sh (it installs the Debian packages fortunes and "
             "fortunes-min), or pass your own text with --data.path");
  corpus.source.format = SourceFormat::text;
  corpus.source.text_split = TextSplit::delimiter;
  corpus.source.delimiter = "%";
  corpus.description = "fortunes (Debian packages fortunes, fortunes-min: English quotations)";
  return corpus;
}

}  // namespace kiln::data
