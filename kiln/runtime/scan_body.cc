#include "kiln/runtime/scan_body.h"

#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/transfer.h"

namespace kiln {
namespace {

struct Body {
  std::shared_ptr<const ir::Graph> graph;
  // By device (to_string): the program, built at the first run there, and
  // an iteration's bytes (iteration_bytes), read at the first ask.
  std::map<std::string, std::shared_ptr<const Executable>> programs;
  std::map<std::string, int64_t> iteration_bytes;
};

// Never destroyed: queued programs may still run scans while the process exits.
std::mutex& bodies_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::string, Body>& bodies() {
  static auto* m = new std::map<std::string, Body>;
  return *m;
}

Body& body_entry(const std::string& text) {
  std::lock_guard lock(bodies_mutex());
  auto it = bodies().find(text);
  if (it == bodies().end())
    it = bodies().emplace(text, Body{std::make_shared<const ir::Graph>(ir::parse_graph(text)), {}}).first;
  return it->second;
}

std::shared_ptr<const Executable> body_program(const std::string& text, Device device) {
  Body& b = body_entry(text);
  const std::string where = to_string(device);
  {
    std::lock_guard lock(bodies_mutex());
    if (auto it = b.programs.find(where); it != b.programs.end()) return it->second;
  }
  auto program =
      get_executable(*b.graph, device, ProgramOptions{default_pass_options(), {}, "scan body"});
  std::lock_guard lock(bodies_mutex());
  return b.programs.emplace(where, program).first->second;  // or another thread's, built meanwhile
}

size_t bytes_of(const TensorRef& r) { return size_t(r.numel()) * itemsize(r.dtype); }

// Slice `i` of a dense tensor stacked along dim 0.
TensorRef slice_of(const TensorRef& stacked, int64_t i) {
  Shape shape = stacked.shape;
  shape.erase(0);
  size_t bytes = size_t(shape.numel()) * itemsize(stacked.dtype);
  return {static_cast<char*>(stacked.data) + size_t(i) * bytes, stacked.dtype, shape,
          contiguous_strides(shape)};
}

// Two device buffers of one slice of a stacked tensor: iterations take
// turns with them, so one is moved to or from the offload pool while the
// other is computed with.
struct DoubleBuffer {
  std::unique_ptr<Storage> storage[2];
  TensorRef side[2];
  DoubleBuffer(Device device, const TensorRef& stacked) {
    const TensorRef slice = slice_of(stacked, 0);
    for (int s = 0; s < 2; ++s) {
      storage[s] = std::make_unique<Storage>(device, std::max<size_t>(bytes_of(slice), 1));
      side[s] = {storage[s]->data, slice.dtype, slice.shape, slice.strides};
    }
  }
};

// Runs on the device's queue thread, the body's steps inline; buffers and
// copies go through the device's backend, so one kernel serves every device.
// Where transfers run apart from the kernels (CUDA), stacked tensors in
// the offload pool move one iteration apart from the compute
// (kiln/runtime/transfer.h): an input's next slice is copied in while the
// body runs on this one, an output's slice is copied out while the body
// runs on the next.
void scan_kernel(const KernelArgs& a) {
  const std::string& text = a.attrs.s("body");
  std::shared_ptr<const Executable> program = body_program(text, a.device);
  Backend& be = backend(a.device);
  const size_t carries = size_t(a.attrs.i("carries")), stacked = size_t(a.attrs.i("stacked"));
  const int64_t length = a.attrs.i("length");
  const bool reverse = a.attrs.b("reverse");
  auto index_at = [&](int64_t step) { return reverse ? length - 1 - step : step; };

  // Two buffers per carry: the iteration reads one and writes the other.
  std::vector<std::unique_ptr<Storage>> buffers;
  std::vector<TensorRef> current, next;
  for (size_t i = 0; i < carries; ++i) {
    const TensorRef& in = a.in[i];
    for (auto* side : {&current, &next}) {
      buffers.push_back(std::make_unique<Storage>(a.device, std::max<size_t>(bytes_of(in), 1)));
      side->push_back({buffers.back()->data, in.dtype, in.shape, contiguous_strides(in.shape)});
    }
    be.strided_copy(current[i], in);
  }
  // By input or output position: the stacked tensors in the offload pool,
  // where transfers run apart (else the body reads and writes them there).
  std::vector<std::pair<size_t, DoubleBuffer>> reloaded, offloaded;
  if (be.transfers_apart()) {
    for (int64_t k : a.attrs.ints("offloaded_stacked"))
      reloaded.emplace_back(carries + size_t(k), DoubleBuffer(a.device, a.in[carries + size_t(k)]));
    if (const int64_t from = a.attrs.i("offload_from"); from >= 0)
      for (size_t k = size_t(from); k < a.out.size(); ++k)
        offloaded.emplace_back(k, DoubleBuffer(a.device, a.out[k]));
  }
  // However the loop ends, the transfers still in flight end before their
  // buffers go back to the pool (after an error, with errors of their own
  // dropped: the one raised says more).
  struct Drain {
    std::function<void()> finish;
    ~Drain() {
      try {
        finish();
      } catch (...) {
      }
    }
  } drain{[&] {
    for (auto& [k, b] : reloaded)
      for (const TensorRef& side : b.side) finish_transfer(side.data);
    for (auto& [k, b] : offloaded)
      for (int64_t i = 0; i < length; ++i) finish_transfer(slice_of(a.out[k], i).data);
  }};
  auto reload = [&](int64_t step) {
    for (auto& [k, b] : reloaded) start_transfer(a.device, b.side[step % 2], slice_of(a.in[k], index_at(step)));
  };
  if (length > 0) reload(0);

  std::vector<TensorRef> ins(a.in.size()), outs(a.out.size());
  for (size_t k = carries + stacked; k < a.in.size(); ++k) ins[k] = a.in[k];
  for (int64_t step = 0; step < length; ++step) {
    const int64_t i = index_at(step);
    for (size_t k = 0; k < carries; ++k) ins[k] = current[k], outs[k] = next[k];
    for (size_t k = 0; k < stacked; ++k) ins[carries + k] = slice_of(a.in[carries + k], i);
    for (size_t k = carries; k < a.out.size(); ++k) outs[k] = slice_of(a.out[k], i);
    for (auto& [k, b] : reloaded) {
      finish_transfer(b.side[step % 2].data);
      ins[k] = b.side[step % 2];
    }
    if (step + 1 < length) reload(step + 1);
    for (auto& [k, b] : offloaded) {
      if (step >= 2) finish_transfer(slice_of(a.out[k], index_at(step - 2)).data);
      outs[k] = b.side[step % 2];
    }
    program->run_inline(ins, outs);
    for (auto& [k, b] : offloaded) start_transfer(a.device, slice_of(a.out[k], i), b.side[step % 2]);
    std::swap(current, next);
  }
  // The buffers go when this returns: the copies out end first.
  for (auto& [k, b] : offloaded)
    for (int64_t step = std::max<int64_t>(length - 2, 0); step < length; ++step)
      finish_transfer(slice_of(a.out[k], index_at(step)).data);
  drain.finish = [] {};
  for (size_t k = 0; k < carries; ++k) be.strided_copy(a.out[k], current[k]);
}

int64_t block_bytes(int64_t bytes) { return int64_t(CachingAllocator::round_size(size_t(bytes))); }

// One iteration's buffers beside the carries': the body program's arena
// (taken anew by each run_inline) and its kernels' largest scratch. Read
// from the body's optimized graph (as body_program builds it), once per
// body and device.
int64_t iteration_bytes(const std::string& text, Device device) {
  Body& b = body_entry(text);
  const std::string where = to_string(device);
  {
    std::lock_guard lock(bodies_mutex());
    if (auto it = b.iteration_bytes.find(where); it != b.iteration_bytes.end()) return it->second;
  }
  const ProgramRunBytes run = program_run_bytes(*b.graph, device, default_pass_options(), {});
  const int64_t bytes = block_bytes(run.arena) + run.scratch;
  std::lock_guard lock(bodies_mutex());
  return b.iteration_bytes.emplace(where, bytes).first->second;
}

// Kernel::scratch_bytes: what scan_kernel takes while it runs (its outputs
// aside): two buffers per carry, an iteration's, and where transfers run
// apart the two device buffers of each stacked tensor in the offload pool.
int64_t scan_scratch_bytes(const PrepareArgs& a) {
  const std::string& text = a.attrs.s("body");
  const size_t carries = size_t(a.attrs.i("carries"));
  int64_t bytes = iteration_bytes(text, a.device);
  auto type_bytes = [](const ir::TypeInfo& t) { return t.shape.numel() * int64_t(itemsize(t.dtype)); };
  for (size_t i = 0; i < carries; ++i) bytes += 2 * block_bytes(type_bytes(a.in[i]));
  if (backend(a.device).transfers_apart()) {
    const ir::Graph& body = *body_entry(text).graph;
    for (int64_t k : a.attrs.ints("offloaded_stacked"))
      bytes += 2 * block_bytes(type_bytes(body.type(body.inputs()[carries + size_t(k)])));
    if (const int64_t from = a.attrs.i("offload_from"); from >= 0)
      for (size_t k = size_t(from); k < body.outputs().size(); ++k)
        bytes += 2 * block_bytes(type_bytes(body.type(body.outputs()[k])));
  }
  return bytes;
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "scan", {.fn = scan_kernel, .strided_inputs = false, .scratch_bytes = scan_scratch_bytes}},
    {DeviceKind::cuda, "scan", {.fn = scan_kernel, .strided_inputs = false, .scratch_bytes = scan_scratch_bytes}}};

}  // namespace

std::shared_ptr<const ir::Graph> scan_body_graph(const std::string& text) {
  return body_entry(text).graph;
}

}  // namespace kiln
