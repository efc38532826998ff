// The CPU backend: 64-byte aligned host memory behind the caching
// allocator, one in-order queue thread, memcpy for host transfers.
#include <cstdlib>
#include <cstring>

#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/threads.h"

namespace kiln::cpu {
namespace {

class HostMemory final : public RawMemory {
 public:
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) & ~size_t(63));
    KILN_CHECK(p, "out of host memory allocating ", bytes, " bytes");
    return p;
  }
  void release(void* p, size_t) override { std::free(p); }
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() : allocator_(memory_) {}
  DeviceKind kind() const override { return DeviceKind::cpu; }
  int device_count() const override { return 1; }
  std::string describe(int) const override {
    return cat("cpu: ", cpu_model(), ", ", num_threads(), " kernel threads");
  }
  std::string model(int) const override { return cpu_model(); }
  std::string gemm_isa(int) const override { return onednn_isa(); }
  CachingAllocator& allocator(int) override { return allocator_; }
  DeviceQueue& queue(int) override { return queue_; }
  void copy_to_host(void* host, const void* device, size_t bytes, int) override {
    std::memcpy(host, device, bytes);
  }
  void copy_from_host(void* device, const void* host, size_t bytes, int) override {
    std::memcpy(device, host, bytes);
  }
  void strided_copy(const TensorRef& dst, const TensorRef& src) override {
    KILN_CHECK(dst.dtype == src.dtype && dst.shape == src.shape, "strided_copy: type mismatch");
    size_t size = itemsize(dst.dtype);
    auto ops = make_operands<2>({&dst, &src});
    for_each_row(ops, [size](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
      if (s[0] == int64_t(size) && s[1] == int64_t(size)) {
        std::memcpy(p[0], p[1], size_t(n) * size);
        return;
      }
      for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * s[0], p[1] + i * s[1], size);
    });
  }

 private:
  HostMemory memory_;
  CachingAllocator allocator_;
  DeviceQueue queue_;
};

const bool registered = [] {
  register_backend(std::make_unique<CpuBackend>());
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
