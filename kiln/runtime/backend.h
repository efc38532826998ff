// A device backend: memory, the execution queue and data movement for one
// device kind. Kernels are registered separately (kernel.h), per op.
#pragma once
#include <memory>
#include <string>

#include "kiln/runtime/allocator.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/queue.h"

namespace kiln {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual int device_count() const = 0;
  virtual std::string describe(int index) const = 0;  // one line for `kiln info`
  // What a measured peak is valid for: the device's model name and the
  // instruction set its GEMMs dispatch to.
  virtual std::string model(int index) const = 0;
  virtual std::string gemm_isa(int index) const = 0;
  virtual CachingAllocator& allocator(int index) = 0;
  virtual DeviceQueue& queue(int index) = 0;
  // Runs on the device queue: copies between a device buffer and the host.
  virtual void copy_to_host(void* host, const void* device, size_t bytes, int index) = 0;
  virtual void copy_from_host(void* device, const void* host, size_t bytes, int index) = 0;
  // Copies src into dst element by element, both strided, same dtype and
  // shape (src may broadcast with zero strides). Runs on the caller's thread.
  virtual void strided_copy(const TensorRef& dst, const TensorRef& src) = 0;
};

void register_backend(std::unique_ptr<Backend> backend);
Backend* find_backend(DeviceKind kind);
Backend& backend(Device d);  // throws when the kind is not built or the index is out of range

// A device buffer from the device's caching allocator.
struct Storage {
  Device device;
  void* data = nullptr;
  size_t nbytes = 0;
  Storage(Device d, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

MemoryStats memory_stats(Device d = kCPU);
void reset_peak_memory(Device d = kCPU);
void empty_cache(Device d = kCPU);

}  // namespace kiln
