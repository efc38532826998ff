// Errors a user can act on: every failure in kiln is a kiln::Error whose
// message says what went wrong, where, and what to do.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace kiln

// Checks a condition on user input; on failure throws kiln::Error built from
// the remaining arguments.
#define KILN_CHECK(cond, ...)                 \
  do {                                        \
    if (!(cond)) ::kiln::fail(__VA_ARGS__);   \
  } while (0)
