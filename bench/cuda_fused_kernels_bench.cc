// The fused CUDA kernels against their ops' composites on the GPU, and
// flash attention against PyTorch's scaled_dot_product_attention (its
// FlashAttention / cuDNN kernels; bench/cuda_attention_torch.py, run with
// $KILN_PYTHON or python3): GPU milliseconds per call from CUDA events on
// kiln's stream, TFLOP/s (attention counts the causal half, as FlashAttention
// reports it) and the ratio. The measurement that chooses between kiln's
// attention kernel and cuDNN's is the "vs torch" column.
//
//   flash attention, causal, B=4, Hq=32, Hkv=8, S=2048, D=128 (an 8B
//     model's layer): bf16 (tensor cores) and f32 (scalar), forward and
//     forward + backward;
//   linear cross-entropy, 8192 tokens, dim 2048, vocab 128256, bf16,
//     forward + backward;
//   grouped matmul, 8 experts x 1024 rows (the composite multiplies every
//     row by every expert) and 64 experts x 128 rows (fused only), K=2048,
//     N=768, bf16, forward + backward.
// Built only with the CUDA backend.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/cuda_timing.h"
#include "kiln/autograd/grad.h"
#include "kiln/ir/op.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/rules.h"

namespace {

using bench::kCuda0;
using kiln::DType;
using kiln::Tensor;

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The op through its CUDA kernel, or through its composite.
Fn op(const std::string& name, const kiln::ir::Attrs& attrs, bool fused) {
  return [=](const std::vector<Tensor>& in) {
    const kiln::ir::OpDef& def = kiln::ir::get_op(name);
    if (fused) return kiln::apply(def, in, attrs);
    kiln::ir::Attrs full = def.complete_attrs(attrs);
    kiln::CompositeCall call{in, full, {}};
    def.composite(call);
    return call.outputs;
  };
}

// Forward only, or forward + backward of sum(out[0]) (gradients of the
// floating inputs).
std::function<void()> step(const Fn& f, const std::vector<Tensor>& in, bool backward) {
  if (!backward) return [=] { f(in); };
  auto vag = kiln::value_and_grad([f](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{kiln::sum(f(a)[0].to(DType::f32))};
  });
  return [=] { vag(in); };
}

Tensor normal(const kiln::Shape& s, DType dt, kiln::Generator& g, double scale = 1) {
  return kiln::normal(s, 0, scale, g, DType::f32, kCuda0).to(dt);
}

void row(const std::string& what, double flops, double fused, double reference,
         const char* reference_name) {
  std::printf("%-44s %9.3f ms %7.1f TFLOP/s", what.c_str(), fused * 1e3, flops / fused / 1e12);
  if (reference > 0)
    std::printf("   %s %9.3f ms, %.2fx", reference_name, reference * 1e3, reference / fused);
  std::printf("\n");
}

}  // namespace

int main() {
  kiln::Backend* cuda = kiln::find_backend(kiln::DeviceKind::cuda);
  if (!cuda || cuda->device_count() == 0) {
    std::string why = cuda ? cuda->no_device_reason() : "kiln was built without the CUDA backend";
    std::printf("skipped: no CUDA device%s%s\n", why.empty() ? "" : ": ", why.c_str());
    return 0;
  }
  std::printf("%s\n%s\n", cuda->model(0).c_str(), cuda->describe(0).c_str());
  kiln::Generator g(1);

  // Attention: B=4, Hq=32, Hkv=8, S=2048, D=128, causal.
  const auto torch = bench::torch_seconds("cuda_attention_torch.py");
  const int64_t B = 4, Hq = 32, Hkv = 8, S = 2048, D = 128;
  const double attention_flops = 2.0 * double(B * Hq * S * S) * double(2 * D) / 2;
  const kiln::ir::Attrs attention{{"causal", true}, {"scale", 1.0 / std::sqrt(double(D))}};
  for (DType dt : {DType::bf16, DType::f32}) {
    std::vector<Tensor> in{normal({B, Hq, S, D}, dt, g), normal({B, Hkv, S, D}, dt, g),
                           normal({B, Hkv, S, D}, dt, g)};
    for (bool backward : {false, true}) {
      const double flops = attention_flops * (backward ? 3.5 : 1.0);  // backward: 2.5x
      const double fused = bench::kiln_seconds(step(op("flash_attention", attention, true), in, backward));
      const double composite =
          bench::kiln_seconds(step(op("flash_attention", attention, false), in, backward));
      const std::string what = std::string("attention ") + kiln::dtype_name(dt) +
                               (backward ? " fwd+bwd" : " fwd");
      row(what, flops, fused, composite, "composite");
      auto t = torch.find(std::string(kiln::dtype_name(dt)) + (backward ? "_fwd_bwd" : "_fwd"));
      if (t != torch.end()) row(what + " vs torch sdpa", flops, fused, t->second, "torch");
    }
    kiln::empty_cache(kCuda0);
  }

  // Linear cross-entropy: 8192 tokens, dim 2048, Llama 3's vocabulary.
  {
    const int64_t N = 8192, dim = 2048, V = 128256;
    std::vector<int64_t> t(static_cast<size_t>(N));
    for (size_t i = 0; i < t.size(); ++i) t[i] = int64_t(i * 7919 % uint64_t(V));
    std::vector<Tensor> in{normal({N, dim}, DType::bf16, g), normal({V, dim}, DType::bf16, g, 0.02),
                           kiln::from_vector(t, {N}).to(kCuda0)};
    const kiln::ir::Attrs attrs{{"ignore_index", int64_t(-100)}, {"reduction", std::string("mean")}};
    const double flops = 3 * 2.0 * double(N) * double(dim) * double(V) + 2.0 * double(N * dim * V);
    row("linear cross-entropy bf16 fwd+bwd", flops,
        bench::kiln_seconds(step(op("linear_cross_entropy", attrs, true), in, true)),
        bench::kiln_seconds(step(op("linear_cross_entropy", attrs, false), in, true)), "composite");
    kiln::empty_cache(kCuda0);
  }

  // Grouped matmul: K=2048, N=768.
  for (int64_t experts : {8, 64}) {
    const int64_t rows = 8192, K = 2048, N = 768;
    std::vector<int64_t> sizes(static_cast<size_t>(experts), rows / experts);
    std::vector<Tensor> in{normal({rows, K}, DType::bf16, g), normal({experts, N, K}, DType::bf16, g, 0.02),
                           kiln::from_vector(sizes, {experts}).to(kCuda0)};
    const double flops = 3 * 2.0 * double(rows * K * N);
    const double fused = bench::kiln_seconds(step(op("grouped_matmul", {}, true), in, true));
    const double composite =
        experts <= 8 ? bench::kiln_seconds(step(op("grouped_matmul", {}, false), in, true)) : 0;
    row("grouped matmul bf16 fwd+bwd, " + std::to_string(experts) + " experts", flops, fused,
        composite, "composite");
    kiln::empty_cache(kCuda0);
  }
  return 0;
}
