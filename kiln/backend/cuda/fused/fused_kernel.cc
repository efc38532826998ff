#include "kiln/backend/cuda/fused/fused_kernel.h"

#include <cuda_runtime.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/fused/codegen.h"
#include "kiln/backend/cuda/fused/cubin_cache.h"
#include "kiln/backend/cuda/fused/module.h"
#include "kiln/backend/cuda/scratch.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"
#include "kiln/codegen/expr.h"
#include "kiln/ir/fingerprint.h"
#include "kiln/ir/graph.h"

namespace kiln::cuda::fused {
namespace {

using codegen::Binding;
using codegen::Plan;
using codegen::Space;

// The kernels of one layout on one device.
struct Kernels {
  cudaKernel_t main = nullptr;     // kiln_fused_eval or kiln_fused_fold
  cudaKernel_t combine = nullptr;  // kiln_fused_combine, for reductions of several chunks
};

int architecture(int device) {
  int major = 0, minor = 0;
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

std::string layout_key(const Space& s) {
  std::string k = cat(s.shape);
  for (const Strides& st : s.strides) k += cat(st);
  return k;
}

void launch(cudaKernel_t k, int64_t blocks, int bx, int by, void* args, cudaStream_t stream) {
  KILN_CHECK(blocks <= INT_MAX, "CUDA fused kernel: ", blocks, " blocks exceed the grid's limit");
  void* params[] = {args};
  // The launch's error is also the thread's last error, which the check reads.
  (void)cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(unsigned(blocks)), dim3(bx, by), params,
                         0, stream);
  KILN_CUDA_CHECK_LAUNCH();
}

class FusedKernel {
 public:
  FusedKernel(const std::string& body, const std::string& kind)
      : plan_(codegen::make_plan(body, kind)),
        launch_(launch_of(plan_)),
        constants_(codegen::full_constants(plan_)) {}

  // Starts compiling the kernels a call in the natural layout runs.
  void prepare(Variant natural, int arch) const {
    if (!empty()) start_cubin(generate_source(plan_, plan_.natural, natural), arch);
  }

  // `natural`: the variant for the natural layout; other layouts run the
  // shape-generic kernels.
  void run(std::span<const TensorRef> in, std::span<const TensorRef> out, Variant natural) {
    Binding b = codegen::bind(plan_, in, out);
    if (empty()) return;
    for (const TensorRef* r : b.results)
      KILN_CHECK(r->contiguous(), "CUDA fused kernel: a reduction's result must be contiguous");
    Call call = make_call(plan_, launch_, b, constants_, natural);
    std::optional<Scratch> partials;
    if (call.partial_bytes > 0)
      call.args[call.partials_word] = reinterpret_cast<uint64_t>(partials.emplace(call.partial_bytes).data());
    const Kernels k = kernels(current_device(), b.space, call.variant);
    cudaStream_t stream = current_stream();
    for (size_t i = 0; i < call.grids.size(); ++i) {  // the main kernel, then the combine
      const Call::Grid& g = call.grids[i];
      launch(i == 0 ? k.main : k.combine, g.blocks, g.x, g.y, call.args.data(), stream);
    }
  }

 private:
  // Nothing to compute: no kernel runs.
  bool empty() const { return plan_.reduction ? plan_.reduction->results == 0 : plan_.numel == 0; }

  // The kernels for a layout on a device: generated, compiled (or found in
  // the cache) and loaded the first time.
  Kernels kernels(int device, const Space& space, Variant variant) {
    std::lock_guard lock(mu_);
    std::string key = variant == Variant::shape_generic ? cat("generic rank ", space.shape.size()) : layout_key(space);
    auto it = loaded_.find({device, key});
    if (it != loaded_.end()) return it->second;
    const std::string source = generate_source(plan_, space, variant);
    const Cubin cubin = cubin_for(source, architecture(device));
    const std::string id = ir::to_string(cubin.key.fingerprint);
    Kernels k;
    k.main = loaded_kernel(device, id, cubin.bytes, plan_.reduction ? kFoldSymbol : kEvalSymbol);
    if (plan_.reduction && launch_.chunks > 1) k.combine = loaded_kernel(device, id, cubin.bytes, kCombineSymbol);
    loaded_.emplace(std::make_pair(device, std::move(key)), k);
    return k;
  }

  const Plan plan_;
  const Launch launch_;
  const std::vector<uint64_t> constants_;
  std::mutex mu_;  // guards loaded_ while a kernel is made
  std::map<std::pair<int, std::string>, Kernels> loaded_;
};

// One kernel per (kind, body); never freed (kernels stay loaded).
FusedKernel& kernel_for(const std::string& body, const std::string& kind) {
  static std::mutex mu;
  static auto* kernels = new std::unordered_map<std::string, std::unique_ptr<FusedKernel>>;
  std::string key = kind + "\n" + body;
  std::lock_guard lock(mu);
  auto it = kernels->find(key);
  if (it == kernels->end()) it = kernels->emplace(std::move(key), std::make_unique<FusedKernel>(body, kind)).first;
  return *it->second;
}

std::string kind_of(const ir::Attrs& attrs) {
  return attrs.has("kind") ? attrs.s("kind") : std::string("elementwise");
}

// The body of one `op` node over inputs of these types.
std::string one_node_body(const ir::OpDef& op, std::span<const ir::TypeInfo> types, const ir::Attrs& attrs) {
  ir::Graph g;
  std::vector<ir::ValueId> inputs;
  for (const ir::TypeInfo& t : types) inputs.push_back(g.add_input(t));
  g.set_outputs(g.add_node(op, std::move(inputs), attrs).outputs);
  return ir::to_text(g);
}

void fused_kernel(const KernelArgs& a) { run_body(a.attrs.s("body"), kind_of(a.attrs), a.in, a.out); }

void prepare_fused(const PrepareArgs& a) {
  prepare_body(a.attrs.s("body"), kind_of(a.attrs), Variant::specialised, architecture(a.device.index));
}

const KernelRegistrar registrations[] = {{DeviceKind::cuda, "fused", {fused_kernel, true, prepare_fused}}};

}  // namespace

void run_body(const std::string& body, const std::string& kind, std::span<const TensorRef> in,
              std::span<const TensorRef> out) {
  kernel_for(body, kind).run(in, out, Variant::specialised);
}

void run_op(const KernelArgs& a, const std::string& kind) {
  std::vector<ir::TypeInfo> types;
  for (const TensorRef& t : a.in) types.push_back({t.dtype, t.shape});
  kernel_for(one_node_body(a.op, types, a.attrs), kind).run(a.in, a.out, Variant::shape_generic);
}

void prepare_body(const std::string& body, const std::string& kind, Variant natural, int arch) {
  kernel_for(body, kind).prepare(natural, arch);
}

void prepare_op(const PrepareArgs& a, const std::string& kind) {
  prepare_body(one_node_body(a.op, a.in, a.attrs), kind, Variant::shape_generic, architecture(a.device.index));
}

}  // namespace kiln::cuda::fused
