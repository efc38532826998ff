#include "kiln/backend/cpu/onednn.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "kiln/runtime/backend.h"

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

void drain_queues_at_exit() {
  std::atexit([] {
    Backend* cpu = find_backend(DeviceKind::cpu);
    for (int i = 0; cpu && i < cpu->device_count(); ++i) try {
        cpu->queue(i).synchronize();
      } catch (...) {  // the program's error: nobody is left to report it to
      }
  });
}

void run_matmul(const dnnl::matmul& m, const dnnl::memory::desc& scratchpad,
                const dnnl::memory::desc& a, const void* a_data, const dnnl::memory::desc& b,
                const void* b_data, const dnnl::memory::desc& c, void* c_data) {
  dnnl::engine& engine = onednn_engine();
  dnnl::stream& stream = onednn_stream();
  // oneDNN's memory objects take non-const handles; it only reads a and b.
  dnnl::memory am(a, engine, const_cast<void*>(a_data)), bm(b, engine, const_cast<void*>(b_data)),
      cm(c, engine, c_data);
  thread_local std::vector<char> buffer;
  if (buffer.size() < scratchpad.get_size()) buffer.resize(scratchpad.get_size());
  dnnl::memory sm(scratchpad, engine, buffer.data());
  m.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm},
                     {DNNL_ARG_SCRATCHPAD, sm}});
  stream.wait();
  static std::once_flag first_run;
  std::call_once(first_run, drain_queues_at_exit);
}

}  // namespace kiln::cpu
