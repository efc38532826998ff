#include "kiln/backend/cpu/onednn.h"

namespace kiln::cpu {

dnnl::engine& onednn_engine() {
  // Never destroyed: the device queue may run kernels while the process exits.
  static auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

std::optional<dnnl::memory::data_type> onednn_type(DType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case DType::f32:
      return dt::f32;
    case DType::bf16:
      return dt::bf16;
    case DType::f16:
      return dt::f16;
    case DType::i32:
      return dt::s32;
    default:
      return std::nullopt;
  }
}

}  // namespace kiln::cpu
