// The oneDNN engine and stream that kiln's CPU kernels share, and the
// matmul primitives they prepare once per layout.
#pragma once
#include <dnnl.hpp>

#include <optional>
#include <string>

#include "kiln/base/dtype.h"

namespace kiln::cpu {

dnnl::engine& onednn_engine();
// A stream for the calling thread (oneDNN streams are not shared between threads).
dnnl::stream& onednn_stream();
// oneDNN's type for `t`; nullopt where oneDNN has none (f64, bool).
std::optional<dnnl::memory::data_type> onednn_type(DType t);

// A matmul primitive with a user scratchpad (each running thread passes its
// own, so several may run it at once on blocks of one product), or none
// where oneDNN has no implementation for its operands.
struct PreparedMatmul {
  std::optional<dnnl::matmul> primitive;
  dnnl::memory::desc a, b, c, scratchpad;
};

// Prepares c = a @ b with `attr` (output scales, post-ops). A oneDNN error
// other than "unimplemented" raises, naming `what` (the product).
PreparedMatmul prepare_matmul(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                              const dnnl::memory::desc& c, dnnl::primitive_attr attr,
                              const std::string& what);

// A prepared matmul's memory objects, made once and pointed at each run's
// buffers: made per run (with the argument map) they cost more than a small
// block product itself. One thread's: a run changes their data handles.
struct MatmulBuffers {
  dnnl::memory a, b, c, scratchpad;
};
MatmulBuffers matmul_buffers(const PreparedMatmul& p);

// Runs a prepared primitive on the calling thread, with a scratchpad of the
// thread's own, and waits for it: on memory objects made for the run, or on
// the caller's buffers (a thread's own, reused run to run).
void run_matmul(const PreparedMatmul& p, const void* a, const void* b, void* c);
void run_matmul(const PreparedMatmul& p, MatmulBuffers& m, const void* a, const void* b, void* c);

}  // namespace kiln::cpu
