// The oneDNN engine and stream that kiln's CPU kernels share.
#pragma once
#include <dnnl.hpp>

#include <optional>

#include "kiln/base/dtype.h"

namespace kiln::cpu {

dnnl::engine& onednn_engine();
// A stream for the calling thread (oneDNN streams are not shared between threads).
dnnl::stream& onednn_stream();
// oneDNN's type for `t`; nullopt where oneDNN has none (f64, bool).
std::optional<dnnl::memory::data_type> onednn_type(DType t);

// oneDNN makes statics as it goes (its JIT code among them) and destroys them
// at exit in reverse order; a device queue still running a product then (a
// program whose results nobody read) would run freed code. Called after each
// new primitive, and after its first run, this registers a drain of the CPU
// queues that runs before the statics made until then are destroyed.
void drain_queues_at_exit();

// Runs a matmul primitive made with a user scratchpad (of descriptor
// `scratchpad`) on the calling thread, with a scratchpad of the thread's
// own, and waits for it.
void run_matmul(const dnnl::matmul& m, const dnnl::memory::desc& scratchpad,
                const dnnl::memory::desc& a, const void* a_data, const dnnl::memory::desc& b,
                const void* b_data, const dnnl::memory::desc& c, void* c_data);

}  // namespace kiln::cpu
