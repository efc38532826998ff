// What kiln's fuzz targets share (tests/fuzz/README.md). Each target feeds
// libFuzzer's input to one parser of outside data: refusing it with a
// kiln::Error is right, and any other exception, a crash, a sanitizer
// report, a hang or a broken invariant (check()) is a defect found.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "kiln/base/error.h"

// libFuzzer's entry point, which KILN_FUZZ_TARGET defines.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define KILN_FUZZ_TARGET(input)                                                   \
  static void kiln_fuzz_one(std::span<const uint8_t> input);                      \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {       \
    try {                                                                         \
      kiln_fuzz_one({data, size});                                                \
    } catch (const ::kiln::Error& e) {                                            \
      ::kiln::fuzz::refused(e);                                                   \
    }                                                                             \
    return 0;                                                                     \
  }                                                                               \
  static void kiln_fuzz_one(std::span<const uint8_t> input)

namespace kiln::fuzz {

inline std::string_view as_text(std::span<const uint8_t> input) {
  return {reinterpret_cast<const char*>(input.data()), input.size()};
}

// An invariant of accepted input: a violation aborts, so libFuzzer keeps the input.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

// parse(text) for text printed from an accepted input: refusing it is a
// defect (shown with the text), as the printer and parser must agree.
template <class Parse>
auto reparse(const std::string& text, Parse&& parse) {
  try {
    return parse(text);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "%s\nof the printed text:\n%s\n", e.what(), text.c_str());
    check(false, "text printed from an accepted input is refused");
    std::abort();
  }
}

// Notes that the last input was refused (replay_main.cc counts and shows it).
void refused(const kiln::Error& e);
// The message of the last input's refusal since the last call, or "" when it was accepted.
std::string take_refusal();

// The input as a file, for parsers that take a path (they map it): an
// anonymous memory file, so no disk is written. Its path stays the same
// for the life of the process.
std::string input_file(std::span<const uint8_t> input);

}  // namespace kiln::fuzz
