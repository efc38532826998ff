// Replays fuzz inputs through a fuzz target without libFuzzer: every file
// named, or under a folder named, once, in sorted order. The normal build
// runs each target's corpus (tests/fuzz/corpus/<target>) this way as a unit
// test, so a crash found and fixed stays fixed under any compiler; seeds
// (files named seed-*) must also be accepted, or they would not cover the
// code past the parser's checks.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs given\n");
    return 2;
  }
  int refused = 0, bad_seeds = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 2;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    std::string why = kiln::fuzz::take_refusal();
    if (why.empty()) continue;
    ++refused;
    const bool seed = f.filename().string().starts_with("seed-");
    bad_seeds += seed;
    std::printf("%s %s: %s\n", seed ? "SEED REFUSED" : "refused", f.c_str(), why.c_str());
  }
  std::printf("replayed %zu inputs, %d refused with a kiln::Error\n", files.size(), refused);
  return bad_seeds ? 1 : 0;
}
