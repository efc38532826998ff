// The decoder stack as a scan (ForwardOptions::scan_layers): the loss and
// every parameter's gradient equal the unrolled stack's bit for bit, for
// every family, and the traced program no longer grows with depth.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/models/transformer.h"
#include "kiln/nn/module.h"
#include "kiln/ops/random.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/recording.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

const char* const kFamilies[] = {"llama3_debug", "qwen3_debug", "qwen3_moe_debug"};

using test::random_ids;

ValueAndGrad loss_and_grads(CausalLM& m, const Tensor& ids, bool scan_layers) {
  return nn::value_and_grad(m, [&] {
    ForwardOptions fo;
    fo.scan_layers = scan_layers;
    return std::vector<Tensor>{m.forward(ids, ids, fo).loss};
  });
}

TEST(ScanLayers, SameLossAndGradientsAsUnrolled) {
  for (const char* name : kFamilies) {
    ModelConfig c = model_config(name);
    c.n_layers = 3;
    auto m = build_model(c, DType::f32, 7);
    Tensor ids = random_ids(2, 16, c.vocab_size, 1);
    ValueAndGrad unrolled = loss_and_grads(*m, ids, false), scanned = loss_and_grads(*m, ids, true);
    EXPECT_EQ(unrolled.values[0].item<float>(), scanned.values[0].item<float>()) << name;
    auto names = m->named_parameters();
    for (size_t i = 0; i < names.size(); ++i)
      EXPECT_EQ(unrolled.grads[i].to_vector<float>(), scanned.grads[i].to_vector<float>())
          << name << ": " << names[i].first;
  }
}

// Nodes in the traced forward + backward of a `layers`-deep model.
size_t traced_nodes(int64_t layers, bool scan_layers) {
  ModelConfig c = model_config("llama3_debug");
  c.n_layers = layers;
  auto m = build_model(c, DType::f32, 7);
  Tensor ids = random_ids(1, 8, c.vocab_size, 2);
  std::vector<Tensor> params = m->parameters();
  auto rec = trace(
      [&](const std::vector<Tensor>& p) {
        ValueAndGrad r = value_and_grad([&](const std::vector<Tensor>& q) {
          nn::ParameterScope scope(*m, q);
          ForwardOptions fo;
          fo.scan_layers = scan_layers;
          return std::vector<Tensor>{m->forward(ids, ids, fo).loss};
        })(p);
        return r.grads;
      },
      types_of(params), kCPU);
  return rec->graph.nodes().size();
}

TEST(ScanLayers, ProgramSizeDoesNotGrowWithDepth) {
  size_t scan2 = traced_nodes(2, true), scan32 = traced_nodes(32, true);
  size_t unrolled2 = traced_nodes(2, false), unrolled32 = traced_nodes(32, false);
  // The weights stack with one concat per parameter (and their gradients
  // split with one node): nothing is per layer.
  EXPECT_EQ(scan32, scan2);
  EXPECT_GT(double(unrolled32), 8 * double(unrolled2)) << unrolled2 << " -> " << unrolled32;
  std::cout << "traced nodes, 2 -> 32 layers: scan " << scan2 << " -> " << scan32 << ", unrolled "
            << unrolled2 << " -> " << unrolled32 << "\n";
}

}  // namespace
}  // namespace kiln
