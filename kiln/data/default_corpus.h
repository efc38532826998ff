// The corpus `kiln train` uses when no --data.path is given: English text
// installed from Debian packages by scripts/setup.sh (see default_corpus.cc
// for which package and files).
#pragma once
#include <string>
#include <vector>

#include "kiln/data/text_source.h"

namespace kiln::data {

struct DefaultCorpus {
  std::vector<std::string> paths;  // files, in order
  TextSourceOptions source;        // how to read them into documents
  std::string description;         // one line, e.g. for the run's banner
};

// Throws kiln::Error when the files are missing, telling the user to run
// scripts/setup.sh or to pass --data.path.
DefaultCorpus default_corpus();

}  // namespace kiln::data
