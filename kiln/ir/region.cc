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

}  // namespace kiln::ir
