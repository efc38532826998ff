#include "kiln/runtime/region.h"

#include <utility>

namespace kiln {
namespace {

constexpr std::string_view kBackwardSuffix = ".backward";

std::string& region_slot() {
  thread_local std::string region;
  return region;
}

}  // namespace

RegionGuard::RegionGuard(std::string name) : previous_(std::exchange(region_slot(), std::move(name))) {}

RegionGuard::~RegionGuard() { region_slot() = std::move(previous_); }

const std::string& current_region() { return region_slot(); }

std::string backward_region(const std::string& forward_region) {
  if (forward_region.empty() || is_backward_region(forward_region)) return forward_region;
  return forward_region + std::string(kBackwardSuffix);
}

bool is_backward_region(const std::string& region) { return region.ends_with(kBackwardSuffix); }

}  // namespace kiln
