#include "kiln/runtime/kernel_launch.h"

#include <algorithm>

#include <vector>

#include "kiln/base/error.h"
#include "kiln/compiler/fused_op.h"

namespace kiln {
namespace {

std::vector<ir::TypeInfo> types_of(std::span<const TensorRef> refs) {
  std::vector<ir::TypeInfo> t;
  t.reserve(refs.size());
  for (const TensorRef& r : refs) t.push_back({r.dtype, r.shape});
  return t;
}

std::string signature(const std::vector<ir::TypeInfo>& in, const std::vector<ir::TypeInfo>& out) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + ir::to_string(in[i]);
  s += " -> ";
  for (size_t i = 0; i < out.size(); ++i) s += (i ? ", " : "") + ir::to_string(out[i]);
  return s;
}

// A fused kernel is named by what it computes: "fused(mul,add,exp)".
std::string span_name(const KernelArgs& a) {
  if (&a.op != &compiler::fused_op()) return a.op.name;
  std::string s = "fused(";
  const auto& nodes = compiler::fused_body(a.attrs.s("body"))->nodes();
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < std::min(nodes.size(), kShown); ++i)
    s += (i ? "," : "") + nodes[i].op->name;
  if (nodes.size() > kShown) s += cat(",+", nodes.size() - kShown);
  return s + ")";
}

}  // namespace

void launch_traced(const Kernel& kernel, const KernelArgs& a, const std::string* program) {
  const bool collective = a.op.fusion == ir::FusionClass::collective;
  profile::Span span(collective ? "comm" : "kernel", span_name(a));
  if (span.on()) {
    std::vector<ir::TypeInfo> in = types_of(a.in), out = types_of(a.out);
    ir::Cost cost = a.op.cost_of(in, out, a.attrs);
    span.arg("types", signature(in, out));
    span.arg("flops", cost.flops);
    span.arg("bytes", cost.bytes);
    if (collective && a.attrs.find("mesh_axis")) span.arg("group", a.attrs.s("mesh_axis"));
    if (program) span.arg("program", *program);
  }
  kernel.fn(a);
}

}  // namespace kiln
