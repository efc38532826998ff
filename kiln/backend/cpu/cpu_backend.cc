// The CPU backend: 64-byte aligned host memory behind the caching
// allocator, one in-order queue thread, memcpy for host transfers.
//
// KILN_CPU_DEVICES=N makes N host devices, cpu:0 to cpu:N-1, each with its
// own allocators and queue (as XLA's forced host device count does): a run
// on cpu:1 shows, without a GPU, that everything it computes was placed on
// the device it asked for, since an op whose inputs are on two devices is
// an error.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/late_transfers.h"
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

constexpr int kMaxHostDevices = 64;

std::atomic<bool> g_late_transfers{false};
// Late transfers not finished yet, by destination: (dst, src).
thread_local std::map<const void*, std::pair<TensorRef, TensorRef>> t_late;

// KILN_CPU_DEVICES, read once; a bad value is an error at the first use of
// a CPU device.
int host_device_count() {
  static const int n = [] {
    const char* env = std::getenv("KILN_CPU_DEVICES");
    if (!env) return 1;
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    return *env && *end == '\0' && v >= 1 && v <= kMaxHostDevices ? int(v) : -1;
  }();
  KILN_CHECK(n > 0, "KILN_CPU_DEVICES='", std::getenv("KILN_CPU_DEVICES"),
             "' must be a whole number from 1 to ", kMaxHostDevices);
  return n;
}

struct HostDevice {
  HostDevice(HostMemory& memory, int index)
      : allocator(memory), offload_allocator(memory), queue(to_string(Device{DeviceKind::cpu, index})) {}
  CachingAllocator allocator;
  CachingAllocator offload_allocator;
  DeviceQueue queue;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() : first_(memory_, 0) {}
  DeviceKind kind() const override { return DeviceKind::cpu; }
  // Throws only for a bad KILN_CPU_DEVICES.
  int device_count() const override { return host_device_count(); }
  std::string describe(int index) const override {
    return cat(to_string(Device{DeviceKind::cpu, index}), ": ", cpu_model(), ", ", num_threads(), " kernel threads, kernels for ",
               kernel_isa());
  }
  std::string model(int) const override { return cpu_model(); }
  // The bf16 path is part of it: a bf16 peak measured on one path says nothing of the other.
  std::string gemm_isa(int) const override {
    return matmul_path(DType::bf16) == MatmulPath::widened_to_f32 ? onednn_isa() + ", bf16 via f32"
                                                                  : onednn_isa();
  }
  std::string describe_matmul(DType dtype) const override { return matmul_path_text(dtype); }
  CachingAllocator& allocator(int index) override { return device(index).allocator; }
  // The same memory, counted apart: what offload moves out of the allocator.
  CachingAllocator* offload_allocator(int index) override { return &device(index).offload_allocator; }
  DeviceQueue& queue(int index) override { return device(index).queue; }
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
  void start_transfer(const TensorRef& dst, const TensorRef& src) override {
    if (g_late_transfers) t_late.insert_or_assign(dst.data, std::pair{dst, src});
    else strided_copy(dst, src);
  }
  bool transfers_apart() const override { return g_late_transfers; }
  void finish_transfer(const void* dst) override {
    auto it = t_late.find(dst);
    if (it == t_late.end()) return;
    const auto [to, from] = it->second;
    t_late.erase(it);
    strided_copy(to, from);
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
  // cpu:0 without a lock (every CPU op asks for it); the others made on first use.
  HostDevice& device(int index) {
    if (index == 0) return first_;
    std::lock_guard lock(mu_);
    KILN_CHECK(index > 0 && index < host_device_count(), "device 'cpu:", index,
               "' does not exist (KILN_CPU_DEVICES makes more)");
    if (others_.empty()) others_.resize(size_t(host_device_count()));
    std::unique_ptr<HostDevice>& d = others_[size_t(index)];
    if (!d) d = std::make_unique<HostDevice>(memory_, index);
    return *d;
  }

  HostMemory memory_;
  HostDevice first_;
  std::mutex mu_;
  // Never destroyed, as the backend registry is not: queue threads may be
  // running while the process exits.
  std::vector<std::unique_ptr<HostDevice>> others_;
};

const bool registered = [] {
  register_backend(std::make_unique<CpuBackend>());
  return true;
}();

}  // namespace

void set_late_transfers(bool on) { g_late_transfers = on; }

}  // namespace kiln::cpu
