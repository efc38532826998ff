// The debug models of the three families: HF parameter names, parameter
// counts, shapes, loss at initialisation, gradient flow, swappable
// components against their composites, packed documents, state_dict round
// trips, and a short training run whose loss falls.
#include "kiln/models/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kiln/kiln.h"
#include "kiln/models/model_fields.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::all_close;

const char* const kFamilies[] = {"llama3_debug", "qwen3_debug", "qwen3_moe_debug"};

using test::random_ids;

std::set<std::string> names_of(nn::Module& m) {
  std::set<std::string> out;
  for (auto& [n, p] : m.named_parameters()) out.insert(n);
  return out;
}

// The names HF's LlamaForCausalLM / Qwen3ForCausalLM / Qwen3MoeForCausalLM
// (transformers 5) give the parameters of a 2-layer model.
std::set<std::string> hf_names(const std::string& family, bool tied) {
  std::set<std::string> n = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!tied) n.insert("lm_head.weight");
  for (int l = 0; l < 2; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* s : {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                          "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "input_layernorm.weight", "post_attention_layernorm.weight"})
      n.insert(p + s);
    if (family != "llama3") n.insert(p + "self_attn.q_norm.weight"), n.insert(p + "self_attn.k_norm.weight");
    if (family == "qwen3_moe") {
      for (const char* s : {"mlp.gate.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj"})
        n.insert(p + s);
    } else {
      for (const char* s : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
        n.insert(p + s);
    }
  }
  return n;
}

TEST(Transformer, HuggingFaceParameterNames) {
  for (const char* name : kFamilies) {
    const ModelConfig& c = model_config(name);
    CausalLM m(c);
    EXPECT_EQ(names_of(m), hf_names(c.family, c.tie_embeddings)) << name;
  }
  // HF's order within a layer: attention, MLP, then the norms.
  CausalLM q(model_config("qwen3_debug"));
  auto named = q.named_parameters();
  EXPECT_EQ(named[0].first, "model.embed_tokens.weight");
  EXPECT_EQ(named[1].first, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(named[5].first, "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(named[7].first, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(named[10].first, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(named.back().first, "model.norm.weight");  // tied: no lm_head
}

TEST(Transformer, ParamCountEqualsSumOfNumels) {
  for (const char* name : kFamilies) {
    const ModelConfig& c = model_config(name);
    CausalLM m(c);
    int64_t total = 0;
    for (auto& [n, p] : m.named_parameters()) total += p->numel();
    EXPECT_EQ(total, param_count(c)) << name;
    EXPECT_EQ(m.num_parameters(), param_count(c)) << name;
  }
  ModelConfig bad = model_config("llama3_debug");
  bad.n_kv_heads = 3;
  EXPECT_THROW(CausalLM{bad}, Error);
  ModelConfig biased = model_config("llama3_debug");
  biased.attention_bias = true;
  EXPECT_EQ(CausalLM(biased).num_parameters(), param_count(biased));
}

TEST(Transformer, ShapesAndLossAtInit) {
  for (const char* name : kFamilies) {
    const ModelConfig& c = model_config(name);
    auto m = build_model(c, DType::f32, 1);
    Tensor ids = random_ids(2, 16, c.vocab_size, 2), targets = random_ids(2, 16, c.vocab_size, 3);
    Tensor logits = m->logits(ids);
    EXPECT_EQ(logits.shape(), Shape({2, 16, c.vocab_size}));
    EXPECT_EQ(logits.dtype(), DType::f32);
    LMOutput out = m->forward(ids, targets);
    // Small init: logits near 0, so the loss is near ln(vocab).
    EXPECT_NEAR(out.ce_loss.item<double>(), std::log(double(c.vocab_size)), 0.05) << name;
    if (c.is_moe()) {
      ASSERT_EQ(out.expert_counts.size(), 2u);
      std::vector<int64_t> counts = out.expert_counts[0].to_vector<int64_t>();
      int64_t sum = 0;
      for (int64_t n : counts) sum += n;
      EXPECT_EQ(sum, 2 * 16 * c.top_k);
      // Perfectly balanced routing gives aux = top_k (HF's formula sums
      // over the top-k slots); random init is close to that.
      EXPECT_NEAR(out.aux_loss.item<double>(), double(c.top_k), 0.3);
      EXPECT_NEAR(out.loss.item<double>(),
                  out.ce_loss.item<double>() + c.router_aux_loss_coef * out.aux_loss.item<double>(),
                  1e-6);
      // The z-loss joins the loss only when weighted.
      EXPECT_GT(out.z_loss.item<double>(), 0);
      ModelConfig zc = c;
      zc.router_z_loss_coef = 0.5;
      auto zm = build_model(zc, DType::f32, 1);
      LMOutput with_z = zm->forward(ids, targets);
      EXPECT_NEAR(with_z.loss.item<double>() - out.loss.item<double>(),
                  0.5 * out.z_loss.item<double>(), 1e-5);
    } else {
      EXPECT_FALSE(out.aux_loss.defined());
      EXPECT_EQ(out.loss.item<double>(), out.ce_loss.item<double>());
    }
  }
}

TEST(Transformer, LossMatchesCrossEntropyOfLogitsAndIgnoresIndex) {
  auto m = build_model(model_config("llama3_debug"), DType::f32, 4);
  Tensor ids = random_ids(2, 8, 2048, 5);
  std::vector<int64_t> t = random_ids(2, 8, 2048, 6).to_vector<int64_t>();
  t[3] = t[12] = -100;
  Tensor targets = from_vector(t, {2, 8});
  double expected =
      cross_entropy(m->logits(ids).reshape({16, 2048}), targets.reshape({16})).item<double>();
  EXPECT_NEAR(m->loss(ids, targets).item<double>(), expected, 1e-6);
}

TEST(Transformer, GradientsReachEveryParameter) {
  for (const char* name : kFamilies) {
    const ModelConfig& c = model_config(name);
    auto m = build_model(c, DType::f32, 7);
    Tensor ids = random_ids(2, 32, c.vocab_size, 8), targets = random_ids(2, 32, c.vocab_size, 9);
    ValueAndGrad r = nn::value_and_grad(*m, [&] { return std::vector<Tensor>{m->loss(ids, targets)}; });
    auto named = m->named_parameters();
    ASSERT_EQ(r.grads.size(), named.size());
    for (size_t i = 0; i < named.size(); ++i) {
      ASSERT_TRUE(r.grads[i].defined()) << named[i].first;
      EXPECT_EQ(r.grads[i].shape(), named[i].second->shape()) << named[i].first;
      std::vector<double> g = r.grads[i].to_vector<double>();
      double norm = 0;
      bool finite = true;
      for (double v : g) norm += v * v, finite = finite && std::isfinite(v);
      EXPECT_TRUE(finite) << name << " " << named[i].first;
      EXPECT_GT(norm, 0) << name << " " << named[i].first;
    }
  }
}

// Every registered implementation of every component (so a new one is
// covered here without editing this test) against the model's default,
// forward and backward, on a dense model with an untied LM head and an MoE
// model with q/k norms and a tied one.
TEST(Transformer, ImplementationsAgree) {
  for (const char* model : {"llama3_debug", "qwen3_moe_debug"})
    for (const ModelField& f : model_fields()) {
      if (!f.registry) continue;
      const ModelConfig& base = model_config(model);
      auto& member = std::get<std::string ModelConfig::*>(f.member);
      for (const std::string& impl : f.registry->names()) {
        if (impl == base.*member) continue;
        SCOPED_TRACE(std::string(model) + " " + f.key + " = " + impl);
        ModelConfig swapped = base;
        swapped.*member = impl;
        auto a = build_model(base, DType::f64, 11), b = build_model(swapped, DType::f64, 11);
        Tensor ids = random_ids(2, 12, base.vocab_size, 12),
               targets = random_ids(2, 12, base.vocab_size, 13);
        ValueAndGrad ra =
            nn::value_and_grad(*a, [&] { return std::vector<Tensor>{a->loss(ids, targets)}; });
        ValueAndGrad rb =
            nn::value_and_grad(*b, [&] { return std::vector<Tensor>{b->loss(ids, targets)}; });
        EXPECT_NEAR(ra.values[0].item<double>(), rb.values[0].item<double>(), 1e-10);
        for (size_t i = 0; i < ra.grads.size(); ++i)
          EXPECT_TRUE(all_close(rb.grads[i], ra.grads[i], 1e-8, 1e-11)) << "grad " << i;
      }
    }
}

TEST(Transformer, PackedDocumentsEqualSeparateSequences) {
  auto m = build_model(model_config("qwen3_debug"), DType::f64, 14);
  Tensor ids = random_ids(1, 10, 2048, 15);
  ForwardOptions packed;
  packed.doc_ids = from_vector<int64_t>({0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, {1, 10});
  packed.positions = from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3, 4, 5}, {1, 10});
  Tensor both = m->logits(ids, packed);
  EXPECT_TRUE(all_close(both.slice(1, 0, 4), m->logits(ids.slice(1, 0, 4)), 1e-10, 1e-12));
  EXPECT_TRUE(all_close(both.slice(1, 4, 10), m->logits(ids.slice(1, 4, 10)), 1e-10, 1e-12));
}

TEST(Transformer, StateDictRoundTripGivesSameLogits) {
  for (const char* name : kFamilies) {
    const ModelConfig& c = model_config(name);
    auto a = build_model(c, DType::f32, 16);
    CausalLM b(c);
    b.load_state_dict(a->state_dict());
    Tensor ids = random_ids(1, 6, c.vocab_size, 17);
    EXPECT_TRUE(all_close(b.logits(ids), a->logits(ids), 0, 0)) << name;
  }
  // A checkpoint of another size is rejected with the offending names.
  auto small = build_model(model_config("qwen3_debug"), DType::f32, 1);
  ModelConfig wider = model_config("qwen3_debug");
  wider.dim = 32;
  CausalLM other(wider);
  try {
    other.load_state_dict(small->state_dict());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight: expected [2048,32], got "
                                         "[2048,64]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Transformer, Bf16Forward) {
  auto m = build_model(model_config("llama3_debug"), DType::bf16, 18);
  Tensor ids = random_ids(1, 8, 2048, 19);
  EXPECT_EQ(m->logits(ids).dtype(), DType::bf16);
  double loss = m->loss(ids, ids).item<double>();
  EXPECT_NEAR(loss, std::log(2048.0), 0.1);
}

// 20 steps of plain SGD (lr 0.2) on one fixed batch of random tokens: the
// models memorise it, from ln(2048) = 7.6 to about 0.5-3.5.
TEST(Transformer, TinyTrainingLoopLossFalls) {
  for (const char* name : kFamilies) {
    const ModelConfig& c = model_config(name);
    auto m = build_model(c, DType::f32, 20);
    Tensor ids = random_ids(2, 16, c.vocab_size, 21), targets = random_ids(2, 16, c.vocab_size, 22);
    double first = 0, last = 0;
    for (int step = 0; step < 20; ++step) {
      ValueAndGrad r = nn::value_and_grad(*m, [&] { return std::vector<Tensor>{m->loss(ids, targets)}; });
      last = r.values[0].item<double>();
      if (step == 0) first = last;
      std::vector<Tensor> p = m->parameters();
      for (size_t i = 0; i < p.size(); ++i) p[i] = p[i] - r.grads[i] * 0.2;
      m->set_parameters(p);
    }
    EXPECT_LT(last, first - 1.5) << name << ": " << first << " -> " << last;
  }
}

}  // namespace
}  // namespace kiln
