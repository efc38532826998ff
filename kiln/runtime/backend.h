// A device backend: memory, the execution queue and data movement for one
// device kind. Kernels are registered separately (kernel.h), per op.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kiln/runtime/allocator.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/queue.h"

namespace kiln {

// Debug mode's NaN/Inf check: the first non-finite element of a tensor.
struct NonFinite {
  int64_t index = -1;  // flat row-major position; -1: every element is finite
  bool nan = false;    // NaN, else an infinity
};

// Device work recorded once and replayed (Backend::record).
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  // Does the recorded work again; on the device's queue thread.
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  // 0 where none is usable; throws only for a bad setting (KILN_CPU_DEVICES).
  virtual int device_count() const = 0;
  // Why device_count() is 0, for error messages ("" when devices exist).
  virtual std::string no_device_reason() const { return ""; }
  virtual std::string describe(int index) const = 0;  // one line for `kiln info`
  // What a measured peak is valid for: the device's model name and the
  // instruction set its GEMMs dispatch to.
  virtual std::string model(int index) const = 0;
  virtual std::string gemm_isa(int index) const = 0;
  // Which path this device's matmuls of `dtype` take, one line for `kiln
  // info` and the run header ("" when there is no choice to report).
  virtual std::string describe_matmul(DType) const { return ""; }
  virtual CachingAllocator& allocator(int index) = 0;
  // The device's offload pool: host memory that activation offload
  // (compiler/remat.h) moves saved activations to between the forward and
  // the backward, with statistics of its own. The CPU's is a second pool
  // over the same memory, so the device pool's peak shows what offload
  // saves. Null where the backend has none.
  virtual CachingAllocator* offload_allocator(int) { return nullptr; }
  virtual DeviceQueue& queue(int index) = 0;
  // Copies between a device buffer and the host, in the order of the
  // device's queue (after the work enqueued before them). copy_to_host has
  // written `host` when it returns; copy_from_host has read `host` when it
  // returns, and the device buffer is written before any later queued work.
  // copy_to_host's callers synchronise first, so that an earlier error is
  // reported as the failure of the work that caused it.
  virtual void copy_to_host(void* host, const void* device, size_t bytes, int index) = 0;
  virtual void copy_from_host(void* device, const void* host, size_t bytes, int index) = 0;
  // Copies src into dst element by element, both strided, same dtype and
  // shape (src may broadcast with zero strides). Runs on the calling thread,
  // which for a device other than the CPU is its queue's (a kernel's).
  virtual void strided_copy(const TensorRef& dst, const TensorRef& src) = 0;
  // A copy that runs apart from the device's kernels (CUDA: on a copy
  // stream, overlapping them): it starts after the work the calling queue
  // thread issued so far and may still be running when this returns;
  // finish_transfer(dst.data) makes the work issued after it wait for it.
  // Every start is finished exactly once (kiln/runtime/transfer.h keeps
  // the books). The default copies at once and has nothing to finish.
  virtual void start_transfer(const TensorRef& dst, const TensorRef& src) { strided_copy(dst, src); }
  virtual void finish_transfer(const void* /*dst*/) {}
  // Whether transfers run apart from the kernels. A kernel that computes
  // on the offload pool's memory then stages it through device buffers
  // moved by transfers (the scan over layers); otherwise kernels read and
  // write it in place.
  virtual bool transfers_apart() const { return false; }
  // The first NaN or Inf of a floating tensor. Runs on the device's queue.
  virtual NonFinite find_non_finite(const TensorRef& t) = 0;
  // Records the device work `work` issues, called on the device's queue
  // thread, for replay: the same launches over the same buffers with no
  // host work between them. CUDA captures it from the stream as a CUDA
  // graph (so nothing runs now). The default, for a backend whose kernels
  // run when called, keeps `work` and calls it again at each replay.
  // Throws kiln::Error saying why the work cannot be recorded.
  virtual std::unique_ptr<RecordedWork> record(int index, std::function<void()> work);
  // Whether a recording holds its kernels' host work too (the default's
  // does: it calls `work` again); a program holding a kernel that reads
  // device values on the host (Kernel::reads_on_host) is recorded only then.
  virtual bool records_host_work() const { return true; }
};

void register_backend(std::unique_ptr<Backend> backend);
Backend* find_backend(DeviceKind kind);
Backend& backend(Device d);  // throws when the kind is not built or the device does not exist

// Which of a device's pools a buffer comes from.
enum class Pool { device, offload };

// A device buffer from one of the device's caching allocators, or memory
// another library owns, borrowed (a DLPack or NumPy import): `release` runs
// when the last tensor on it is gone, and no pool sees it. Made on a thread
// in a PrivateMemoryScope, the main pool's buffers come from that private
// pool instead (private_memory.h).
struct Storage {
  Device device;
  void* data = nullptr;
  size_t nbytes = 0;
  Pool pool = Pool::device;
  std::function<void()> release;  // set: borrowed memory
  std::shared_ptr<CachingAllocator> private_pool;  // set: from a private pool
  Storage(Device d, size_t bytes, Pool p = Pool::device);
  Storage(Device d, void* borrowed, size_t bytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// The bytes of the distinct buffers among `storages`: what a queued task
// holding them keeps allocated (DeviceQueue's held_bytes).
int64_t distinct_bytes(std::span<const std::shared_ptr<Storage>> storages);

MemoryStats memory_stats(Device d = kCPU, Pool p = Pool::device);
void reset_peak_memory(Device d = kCPU, Pool p = Pool::device);
void empty_cache(Device d = kCPU);  // both pools

}  // namespace kiln
