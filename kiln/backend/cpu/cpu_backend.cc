// The CPU backend: 64-byte aligned host memory behind the caching
// allocator, one in-order queue thread, memcpy for host transfers.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/threads.h"

namespace kiln::cpu {
namespace {

class HostMemory final : public RawMemory {
 public:
  void* allocate(size_t bytes) override {
    return std::aligned_alloc(64, (bytes + 63) & ~size_t(63));
  }
  void release(void* p, size_t) override { std::free(p); }
  std::string out_of_memory(size_t bytes, const MemoryStats& stats) override {
    return cat("out of host memory allocating ", bytes, " bytes (kiln holds ", stats.reserved,
               " bytes, all of them in live tensors)");
  }
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() : allocator_(memory_), offload_allocator_(memory_) {}
  DeviceKind kind() const override { return DeviceKind::cpu; }
  int device_count() const override { return 1; }
  std::string describe(int) const override {
    return cat("cpu: ", cpu_model(), ", ", num_threads(), " kernel threads, kernels for ",
               kernel_isa());
  }
  std::string model(int) const override { return cpu_model(); }
  // The bf16 path is part of it: a bf16 peak measured on one path says nothing of the other.
  std::string gemm_isa(int) const override {
    return matmul_path(DType::bf16) == MatmulPath::widened_to_f32 ? onednn_isa() + ", bf16 via f32"
                                                                  : onednn_isa();
  }
  std::string describe_matmul(DType dtype) const override { return matmul_path_text(dtype); }
  CachingAllocator& allocator(int) override { return allocator_; }
  // The same memory, counted apart: what offload moves out of allocator_.
  CachingAllocator* offload_allocator(int) override { return &offload_allocator_; }
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
  NonFinite find_non_finite(const TensorRef& t) override {
    NonFinite found;
    visit_dtype(t.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
        // In row-major order, so the first one found is the first by index.
        const int r = t.rank();
        std::vector<int64_t> idx(size_t(r), 0);
        const char* base = static_cast<const char*>(t.data);
        for (int64_t i = 0; i < t.numel(); ++i) {
          int64_t off = 0;
          for (int d = 0; d < r; ++d) off += idx[size_t(d)] * t.strides[d];
          double v = load<T>(base + off * int64_t(sizeof(T)));
          if (!std::isfinite(v)) {
            found = {i, std::isnan(v)};
            return;
          }
          for (int d = r - 1; d >= 0 && ++idx[size_t(d)] == t.shape[d]; --d) idx[size_t(d)] = 0;
        }
      }
    });
    return found;
  }

 private:
  HostMemory memory_;
  CachingAllocator allocator_;
  CachingAllocator offload_allocator_;
  DeviceQueue queue_{"cpu"};
};

const bool registered = [] {
  register_backend(std::make_unique<CpuBackend>());
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
