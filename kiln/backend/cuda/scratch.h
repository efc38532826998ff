// Temporary device memory for a kernel's own use (a GEMM's workspace, a
// sort's buffers): a block of the device's caching allocator, so the memory
// statistics and the expected peak (Kernel::scratch_bytes) count it as they
// count the CPU's. The kernel holds it until it returns; it goes back to
// the pool then, while the work that uses it may still be running, which
// is safe as the pool is stream-ordered (device_memory.h). While a program
// is recorded (private_memory.h), the block comes from the recording's own
// pool, whose blocks no other work is handed.
#pragma once
#include <cstddef>
#include <memory>

namespace kiln {
struct Storage;
}

namespace kiln::cuda {

class Scratch {
 public:
  explicit Scratch(size_t bytes);  // on the current device
  ~Scratch();
  Scratch(Scratch&&) noexcept;
  Scratch& operator=(Scratch&&) noexcept;

  template <class T = char>
  T* as() const {
    return static_cast<T*>(data());
  }
  void* data() const;

 private:
  std::unique_ptr<Storage> storage_;
};

}  // namespace kiln::cuda
