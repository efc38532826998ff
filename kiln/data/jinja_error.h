// How the template engine reports errors: every message names the template
// and its line ("chat template line 3: unsupported filter 'wordwrap'").
#pragma once
#include <stdexcept>
#include <string>

#include "kiln/base/error.h"

namespace kiln::data::jinja {

template <class... Args>
[[noreturn]] void fail_at(const std::string& template_name, int line, const Args&... parts) {
  fail(template_name, " line ", line, ": ", parts...);
}

// An error while rendering, thrown by code that does not know where in the
// template it runs (value operations, builtins); the interpreter adds the
// line of the expression or statement and rethrows it as a kiln::Error.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void failure(const Args&... args) {
  throw Failure(cat(args...));
}

}  // namespace kiln::data::jinja
