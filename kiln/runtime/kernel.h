// What a backend kernel sees: raw strided buffers, the op and its attributes.
// Kernels know nothing of Tensor handles, graphs or eager modes.
#pragma once
#include <span>
#include <string_view>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/device.h"

namespace kiln {

struct TensorRef {
  void* data = nullptr;  // points at element 0 (the view's offset applied)
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;  // in elements; 0 for broadcast dimensions

  int64_t numel() const { return shape.numel(); }
  int rank() const { return shape.size(); }
  bool contiguous() const { return is_contiguous(shape, strides); }
  template <class T> T* ptr() const { return static_cast<T*>(data); }
};

struct KernelArgs {
  std::span<const TensorRef> in;
  std::span<const TensorRef> out;  // freshly allocated and contiguous
  const ir::Attrs& attrs;
  const ir::OpDef& op;
  Device device = kCPU;  // where the buffers live (kernels that allocate or run programs need it)
};

using KernelFn = void (*)(const KernelArgs&);

// What a kernel's node hooks (prepare, scratch_bytes) see: a node of a
// program, its inputs' types (contiguous buffers, as a program's are) and
// its device.
struct PrepareArgs {
  std::span<const ir::TypeInfo> in;
  const ir::Attrs& attrs;
  const ir::OpDef& op;
  Device device;
};
using PrepareFn = void (*)(const PrepareArgs&);
using ScratchFn = int64_t (*)(const PrepareArgs&);

struct Kernel {
  KernelFn fn = nullptr;
  // True when the kernel reads strided (non-contiguous, broadcast) inputs;
  // otherwise the runtime makes inputs contiguous before calling it.
  bool strided_inputs = false;
  // Optional (null for kernels that need none). Called by the Executable's
  // constructor (compile(fn), the graph trainer) for each of its nodes, so
  // a kernel that generates code starts compiling it now, in the background
  // (runtime/compile_pool.h), rather than at its first call: CUDA's fused
  // kernels start their NVRTC compiles, the CPU's its shared-object build.
  // It returns without waiting; the call then waits only for its own code.
  // Repeated calls for one node start nothing new. What it throws is
  // dropped: the call raises the same error, naming the node.
  PrepareFn prepare = nullptr;
  // Set, to what it reads (and any alternative a recording holds), for a
  // kernel that reads device values on the host to issue its device work.
  // A backend whose recordings hold device work only
  // (Backend::records_host_work: CUDA's graphs) runs the programs holding
  // it launch by launch.
  const char* reads_on_host = nullptr;
  // Optional: the bytes of the temporary buffers the kernel takes from the
  // device's pool while it runs, beside its outputs (a fused cross-entropy's
  // logits tile, inputs widened to the compute type), each in the size
  // class the pool rounds it up to (CachingAllocator::round_size), so that
  // the expected peak memory counts them (kernel_scratch_bytes in executable.h).
  ScratchFn scratch_bytes = nullptr;
};

// A backend built in several instruction-set variants (the CPU backend's
// AVX-512 copy) registers an op once per variant it loads, the
// better one with the higher priority, which wins whatever the order; the
// same priority twice is an error.
void register_kernel(DeviceKind device, std::string_view op, Kernel kernel, int priority = 0);
const Kernel* find_kernel(DeviceKind device, std::string_view op);

// Kernels that return with work still running (a collective's start, which
// its wait finishes) register how to finish the calling thread's
// outstanding work. A compiled program that fails between the two calls
// drain_in_flight() before its buffers are freed, so nothing is written
// into freed memory; errors of the abandoned work are dropped (the
// program's own error is the one reported).
using DrainFn = void (*)();
void register_in_flight_drain(DrainFn drain);
void drain_in_flight();

// Registers kernels from a static initialiser in a backend's source file.
struct KernelRegistrar {
  KernelRegistrar(DeviceKind device, std::string_view op, Kernel kernel, int priority = 0) {
    register_kernel(device, op, kernel, priority);
  }
};

}  // namespace kiln
