#include "tests/fuzz/fuzz_target.h"

#include <sys/mman.h>
#include <unistd.h>

#include <utility>

namespace kiln::fuzz {
namespace {
std::string last_refusal;
}  // namespace

void refused(const kiln::Error& e) { last_refusal = e.what(); }

std::string take_refusal() { return std::exchange(last_refusal, ""); }

std::string input_file(std::span<const uint8_t> input) {
  static const int fd = memfd_create("kiln-fuzz-input", 0);
  if (fd < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  if (ftruncate(fd, 0) != 0 ||
      (!input.empty() && pwrite(fd, input.data(), input.size(), 0) != ssize_t(input.size()))) {
    std::perror("writing the fuzz input file");
    std::abort();
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace kiln::fuzz
