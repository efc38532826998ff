#include "kiln/backend/cuda/async_error.h"

#include <map>
#include <mutex>

namespace kiln::cuda {
namespace {

std::mutex mu;
std::map<int, std::string>& kept() {
  static auto* m = new std::map<int, std::string>;  // never destroyed: reporting threads may outlive main
  return *m;
}

}  // namespace

void report_async_error(int device, const std::string& message) {
  std::lock_guard lock(mu);
  kept().emplace(device, message);
}

std::string take_async_error(int device) {
  std::lock_guard lock(mu);
  auto it = kept().find(device);
  if (it == kept().end()) return "";
  std::string message = std::move(it->second);
  kept().erase(it);
  return message;
}

}  // namespace kiln::cuda
