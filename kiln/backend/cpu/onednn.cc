#include "kiln/backend/cpu/onednn.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "kiln/base/error.h"
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

namespace {

// oneDNN makes statics as it goes (its JIT code among them) and destroys them
// at exit in reverse order; a device queue still running a product then (a
// program whose results nobody read) would run freed code. Registered after
// each new primitive, and after the first run, a drain of the CPU queues
// runs before the statics made until then are destroyed.
void drain_queues_at_exit() {
  std::atexit([] {
    Backend* cpu = find_backend(DeviceKind::cpu);
    for (int i = 0; cpu && i < cpu->device_count(); ++i) try {
        cpu->queue(i).synchronize();
      } catch (...) {  // the program's error: nobody is left to report it to
      }
  });
}

}  // namespace

PreparedMatmul prepare_matmul(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                              const dnnl::memory::desc& c, dnnl::primitive_attr attr,
                              const std::string& what) {
  PreparedMatmul p{std::nullopt, a, b, c, {}};
  try {
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, onednn_engine());
    p.primitive = dnnl::matmul(pd);
    p.scratchpad = pd.scratchpad_desc();
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) fail(what, ": oneDNN could not set it up: ", e.what());
  }
  drain_queues_at_exit();
  return p;
}

MatmulBuffers matmul_buffers(const PreparedMatmul& p) {
  dnnl::engine& engine = onednn_engine();
  return {dnnl::memory(p.a, engine, DNNL_MEMORY_NONE), dnnl::memory(p.b, engine, DNNL_MEMORY_NONE),
          dnnl::memory(p.c, engine, DNNL_MEMORY_NONE),
          dnnl::memory(p.scratchpad, engine, DNNL_MEMORY_NONE)};
}

void run_matmul(const PreparedMatmul& p, const void* a, const void* b, void* c) {
  MatmulBuffers m = matmul_buffers(p);
  run_matmul(p, m, a, b, c);
}

void run_matmul(const PreparedMatmul& p, MatmulBuffers& m, const void* a, const void* b, void* c) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < p.scratchpad.get_size()) buffer.resize(p.scratchpad.get_size());
  // oneDNN's memory objects take non-const handles; it only reads a and b.
  m.a.set_data_handle(const_cast<void*>(a));
  m.b.set_data_handle(const_cast<void*>(b));
  m.c.set_data_handle(c);
  m.scratchpad.set_data_handle(buffer.data());
  // The C call: the C++ one builds its argument list on the heap each run.
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, m.a.get()},
                                  {DNNL_ARG_WEIGHTS, m.b.get()},
                                  {DNNL_ARG_DST, m.c.get()},
                                  {DNNL_ARG_SCRATCHPAD, m.scratchpad.get()}};
  dnnl::stream& stream = onednn_stream();
  dnnl_status_t st = dnnl_primitive_execute(p.primitive->get(), stream.get(), 4, args);
  if (st == dnnl_success) st = dnnl_stream_wait(stream.get());
  KILN_CHECK(st == dnnl_success, "matmul: oneDNN failed to run a prepared product (status ",
             int(st), ")");
  static std::once_flag first_run;
  std::call_once(first_run, drain_queues_at_exit);
}

}  // namespace kiln::cpu
