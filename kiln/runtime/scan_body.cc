#include "kiln/runtime/scan_body.h"

#include <map>
#include <mutex>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/program_cache.h"

namespace kiln {
namespace {

struct Body {
  std::shared_ptr<const ir::Graph> graph;
  std::shared_ptr<const Executable> program;  // built at the first run
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
  {
    std::lock_guard lock(bodies_mutex());
    if (b.program) return b.program;
  }
  auto program =
      get_executable(*b.graph, device, ProgramOptions{default_pass_options(), {}, "scan body"});
  std::lock_guard lock(bodies_mutex());
  if (!b.program) b.program = program;
  return b.program;
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

// Runs on the device's queue thread, the body's steps inline; buffers and
// copies go through the device's backend, so one kernel serves every device.
void scan_kernel(const KernelArgs& a) {
  const std::string& text = a.attrs.s("body");
  std::shared_ptr<const Executable> program = body_program(text, a.device);
  Backend& be = backend(a.device);
  const size_t carries = size_t(a.attrs.i("carries")), stacked = size_t(a.attrs.i("stacked"));
  const int64_t length = a.attrs.i("length");
  const bool reverse = a.attrs.b("reverse");

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
  std::vector<TensorRef> ins(a.in.size()), outs(a.out.size());
  for (size_t k = carries + stacked; k < a.in.size(); ++k) ins[k] = a.in[k];
  for (int64_t step = 0; step < length; ++step) {
    const int64_t i = reverse ? length - 1 - step : step;
    for (size_t k = 0; k < carries; ++k) ins[k] = current[k], outs[k] = next[k];
    for (size_t k = 0; k < stacked; ++k) ins[carries + k] = slice_of(a.in[carries + k], i);
    for (size_t k = carries; k < a.out.size(); ++k) outs[k] = slice_of(a.out[k], i);
    program->run_inline(ins, outs);
    std::swap(current, next);
  }
  for (size_t k = 0; k < carries; ++k) be.strided_copy(a.out[k], current[k]);
}

const KernelRegistrar registrations[] = {{DeviceKind::cpu, "scan", {scan_kernel, false}},
                                         {DeviceKind::cuda, "scan", {scan_kernel, false}}};

}  // namespace

std::shared_ptr<const ir::Graph> scan_body_graph(const std::string& text) {
  return body_entry(text).graph;
}

}  // namespace kiln
