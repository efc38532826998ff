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

}  // namespace kiln::cpu
