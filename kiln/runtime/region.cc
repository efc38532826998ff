#include "kiln/runtime/region.h"

#include <utility>

namespace kiln {
namespace {

std::string& region_slot() {
  thread_local std::string region;
  return region;
}

}  // namespace

RegionGuard::RegionGuard(std::string name) : previous_(std::exchange(region_slot(), std::move(name))) {}

RegionGuard::~RegionGuard() { region_slot() = std::move(previous_); }

const std::string& current_region() { return region_slot(); }

}  // namespace kiln
