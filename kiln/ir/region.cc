#include "kiln/ir/region.h"

#include <string_view>

namespace kiln::ir {
namespace {
constexpr std::string_view kBackwardSuffix = ".backward";
}  // namespace

std::string backward_region(const std::string& forward_region) {
  if (forward_region.empty() || is_backward_region(forward_region)) return forward_region;
  return forward_region + std::string(kBackwardSuffix);
}

bool is_backward_region(const std::string& region) { return region.ends_with(kBackwardSuffix); }

int64_t region_index(const std::string& region) {
  std::string_view name = region;
  if (name.ends_with(kBackwardSuffix)) name.remove_suffix(kBackwardSuffix.size());
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == name.size() || name.size() - dot > 10) return -1;
  int64_t n = 0;
  for (char c : name.substr(dot + 1)) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace kiln::ir
