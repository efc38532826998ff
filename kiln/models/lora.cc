#include "kiln/models/lora.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"

namespace kiln {
namespace {

std::string joined_choices() {
  std::string s;
  for (const std::string& n : lora_target_names()) s += (s.empty() ? "" : ",") + n;
  return s;
}

// The block's Linear layer a target names; null where the block has none
// (gate, up, down of an MoE layer).
nn::Linear* target_layer(TransformerBlock& block, const std::string& target) {
  nn::Attention& a = block.self_attn;
  if (target == "q") return &a.q_proj;
  if (target == "k") return &a.k_proj;
  if (target == "v") return &a.v_proj;
  if (target == "o") return &a.o_proj;
  if (!block.mlp) return nullptr;
  if (target == "gate") return &block.mlp->gate_proj;
  if (target == "up") return &block.mlp->up_proj;
  if (target == "down") return &block.mlp->down_proj;
  fail("LoRA: unknown target '", target, "'");
}

const std::string kA = ".lora_A.weight", kB = ".lora_B.weight";

}  // namespace

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q", "k", "v", "o", "gate", "up", "down"};
  return names;
}

std::vector<std::string> parse_lora_targets(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = std::min(list.find(',', start), list.size());
    std::string name(list.substr(start, end - start));
    KILN_CHECK(!name.empty(), "LoRA targets '", list, "': an empty name; list some of ",
               joined_choices(), " separated by commas");
    const auto& known = lora_target_names();
    KILN_CHECK(std::find(known.begin(), known.end(), name) != known.end(), "LoRA targets '", list,
               "': '", name, "' is not a layer LoRA can adapt; the choices are ", joined_choices());
    KILN_CHECK(std::find(out.begin(), out.end(), name) == out.end(), "LoRA targets '", list,
               "': '", name, "' is listed twice");
    out.push_back(std::move(name));
    start = end + 1;
  }
  return out;
}

std::string lora_module_name(const std::string& target) { return target + "_proj"; }

int64_t add_lora(CausalLM& model, const LoraOptions& options, Generator& g) {
  KILN_CHECK(options.rank >= 1, "LoRA: rank must be at least 1, got ", options.rank);
  KILN_CHECK(options.alpha > 0, "LoRA: alpha must be positive, got ", options.alpha);
  int64_t added = 0;
  for (const std::string& target : options.targets) {
    int64_t here = 0;
    for (size_t i = 0; i < model.model.layers.size(); ++i)
      if (nn::Linear* layer = target_layer(model.model.layers[i], target)) {
        layer->add_lora(options.rank, options.scale(), g);
        ++here;
      }
    KILN_CHECK(here > 0, "LoRA target '", target, "': the model (", model.config().name,
               ") has no such layer: every MLP is a mixture of experts, whose experts are "
               "stacked tensors, not Linear layers; adapt q, k, v, o");
    added += here;
  }
  return added;
}

bool is_lora_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

nn::StateDict merge_lora(nn::StateDict weights, const nn::StateDict& adapters, double scale) {
  for (const auto& [name, a] : adapters) {
    KILN_CHECK(is_lora_parameter(name) && (name.ends_with(kA) || name.ends_with(kB)),
               "merging LoRA adapters: '", name, "' is not an adapter weight (",
               "<module>.lora_A.weight or <module>.lora_B.weight)");
    if (!name.ends_with(kA)) continue;
    const std::string module = name.substr(0, name.size() - kA.size());
    auto b = adapters.find(module + kB);
    KILN_CHECK(b != adapters.end(), "merging LoRA adapters: '", name, "' has no '", module + kB,
               "'");
    auto w = weights.find(module + ".weight");
    KILN_CHECK(w != weights.end(), "merging LoRA adapters: the model has no '", module,
               ".weight' for adapter '", name, "'");
    const Tensor& W = w->second;
    const Tensor A = a.to(DType::f32), B = b->second.to(DType::f32);
    KILN_CHECK(A.rank() == 2 && B.rank() == 2 && B.dim(1) == A.dim(0) && W.rank() == 2 &&
                   B.dim(0) == W.dim(0) && A.dim(1) == W.dim(1),
               "merging LoRA adapters of '", module, "': lora_B ", B.shape(), " @ lora_A ",
               A.shape(), " does not fit the weight ", W.shape());
    w->second = (W.to(DType::f32) + matmul(B, A) * scale).to(W.dtype());
  }
  for (const auto& [name, b] : adapters)
    KILN_CHECK(!name.ends_with(kB) ||
                   adapters.count(name.substr(0, name.size() - kB.size()) + kA),
               "merging LoRA adapters: '", name, "' has no lora_A beside it");
  return weights;
}

}  // namespace kiln
