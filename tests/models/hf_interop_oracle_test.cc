// kiln's Llama 3, Qwen3 and Qwen3-MoE models against Hugging Face
// transformers (tests/oracle/hf_models.py), both ways:
//  - transformers builds each debug model with seeded random f32 weights and
//    saves it (save_pretrained, safetensors; the Llama one sharded); kiln
//    loads the directory and matches its config, logits, loss (next-token
//    cross-entropy, plus the load-balancing term for MoE) and the gradient
//    of every parameter, with the composite ops and again with every fused
//    kernel (flash attention, fused linear cross-entropy, grouped MoE matmul);
//  - kiln saves a model directory of its own (one of them sharded) and
//    transformers loads it (every weight, nothing missing or unexpected) and
//    matches kiln's logits and loss.
// The transformers reference is computed in float64 from the f32 weights, so
// the tolerances below measure kiln's f32 error alone; transformers' own f32
// run is ~3e-6 from the same reference on the logits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "kiln/base/error.h"
#include "kiln/io/safetensors.h"
#include "kiln/models/hf_config.h"
#include "kiln/models/hf_dir.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "tests/support/model_configs.h"
#include "tests/support/python.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// |kiln - ref| <= kAtol * max|ref| + kRtol * |ref|, per tensor: gradients of
// different parameters differ in scale by orders of magnitude, so the
// absolute part is relative to each tensor's largest entry.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-4;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln_hf_interop_XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    if (!::testing::Test::HasFailure()) fs::remove_all(path_);  // kept for debugging
  }
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

struct Diff {
  double max_abs = 0, max_ref = 0;
};
Diff error_of(const Tensor& kiln, const Tensor& ref) {
  std::vector<double> a = kiln.to_vector<double>(), b = ref.to_vector<double>();
  Diff e;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    e.max_abs = std::max(e.max_abs, std::abs(a[i] - b[i]));
    e.max_ref = std::max(e.max_ref, std::abs(b[i]));
  }
  return e;
}

::testing::AssertionResult matches(const std::string& what, const Tensor& kiln, const Tensor& ref) {
  Diff e = error_of(kiln, ref);
  ::testing::AssertionResult r = test::all_close(kiln, ref, kRtol, kAtol * e.max_ref);
  if (!r) r << " (" << what << ", max |ref| " << e.max_ref << ")";
  return r;
}

// Targets for next-token prediction: ids shifted left, the last one ignored
// (what transformers does with labels = input_ids).
Tensor shifted_targets(const Tensor& ids) {
  std::vector<int64_t> v = ids.to_vector<int64_t>();
  const int64_t B = ids.dim(0), S = ids.dim(1);
  std::vector<int64_t> t(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) t[b * S + s] = s + 1 < S ? v[b * S + s + 1] : -100;
  return from_vector(t, ids.shape());
}

// kiln's loss and the gradient of every parameter against the reference;
// prints the errors for the record.
void check_loss_and_grads(CausalLM& model, const SafetensorsFile& ref, const Tensor& ids,
                          const Tensor& targets, const ForwardOptions& at,
                          const std::string& label) {
  SCOPED_TRACE(label);
  ValueAndGrad vg =
      nn::value_and_grad(model, [&] { return std::vector<Tensor>{model.loss(ids, targets, at)}; });
  double loss = vg.values[0].item<double>(), ref_loss = ref.get("loss").item<double>();
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));
  std::cout << label << ": loss " << loss << " vs " << ref_loss << " (abs error "
            << std::abs(loss - ref_loss) << ")\n";

  // Every parameter has a gradient in the reference and no reference
  // gradient lacks a parameter.
  auto named = model.named_parameters();
  ASSERT_EQ(vg.grads.size(), named.size());
  std::set<std::string> ref_grads;
  for (const std::string& n : ref.names())
    if (n.starts_with("grad.")) ref_grads.insert(n.substr(5));
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < named.size(); ++i) {
    const std::string& name = named[i].first;
    ASSERT_TRUE(ref_grads.erase(name)) << "transformers has no parameter " << name;
    Tensor g = ref.get("grad." + name);
    EXPECT_TRUE(matches("grad " + name, vg.grads[i], g));
    Diff e = error_of(vg.grads[i], g);
    if (e.max_ref > 0 && e.max_abs / e.max_ref > worst) {
      worst = e.max_abs / e.max_ref;
      worst_name = name;
    }
  }
  EXPECT_TRUE(ref_grads.empty()) << "kiln lacks " << ref_grads.size() << " parameters, e.g. "
                                 << (ref_grads.empty() ? "" : *ref_grads.begin());
  std::cout << label << ": " << named.size() << " gradients; worst max|err|/max|ref| " << worst
            << " (" << worst_name << ")\n";
}

struct Case {
  const char* name;           // hf_models.py case
  const char* registry;       // the kiln config it must parse to ("" if none)
  uint64_t save_shard_bytes;  // for the kiln -> transformers direction
};

constexpr Case kCases[] = {
    {"llama3_debug", "llama3_debug", 200'000},
    {"qwen3_debug", "qwen3_debug", 5'000'000'000},
    {"qwen3_moe_debug", "qwen3_moe_debug", 100'000},
    {"qwen3_moe_mixed", "", 5'000'000'000},
};

// The kiln config a case's transformers model must parse to: the registry's,
// or for qwen3_moe_mixed the MoE debug model with a dense layer 0, attention
// biases and no top-k renormalisation.
ModelConfig case_config(const Case& c) {
  if (*c.registry) return model_config(c.registry);
  ModelConfig m = model_config("qwen3_moe_debug");
  m.mlp_only_layers = {0};
  m.norm_topk_prob = false;
  m.attention_bias = true;
  m.router_aux_loss_coef = 0.01;
  return m;
}

// transformers builds and saves every case once, for the whole suite (one
// Python process: importing transformers is the slow part).
class HfInterop : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    made_ = test::run_oracle_script("hf_models.py", cat("make --out \"", *dir_ / "", "\""),
                                    *dir_ / "make.log");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
  static ::testing::AssertionResult made_;
};
TempDir* HfInterop::dir_ = nullptr;
::testing::AssertionResult HfInterop::made_ = ::testing::AssertionSuccess();

TEST_P(HfInterop, TransformersToKiln) {
  const Case& c = GetParam();
  ASSERT_TRUE(made_);
  const std::string dir = *dir_ / c.name;

  HfConfig hf = read_hf_config(dir + "/hf/config.json");
  test::expect_same_architecture(hf.model, case_config(c));
  ASSERT_EQ(hf.dtype, DType::f32);

  std::unique_ptr<CausalLM> model = load_hf_model(dir + "/hf");
  SafetensorsFile ref(dir + "/reference.safetensors");
  Tensor ids = ref.get("input_ids");
  Tensor targets = shifted_targets(ids);
  ForwardOptions at;
  at.positions = ref.get("position_ids");

  Tensor logits = model->logits(ids, at);
  EXPECT_TRUE(matches("logits", logits, ref.get("logits")));
  Diff le = error_of(logits, ref.get("logits"));
  std::cout << c.name << ": logits max abs error " << le.max_abs << " (max |logit| " << le.max_ref
            << ")\n";

  check_loss_and_grads(*model, ref, ids, targets, at, c.name);

  // The same weights with every fused kernel switched on: flash attention,
  // fused linear cross-entropy and (MoE) the grouped expert matmul.
  ModelConfig fused = hf.model;
  fused.attention_impl = "flash";
  fused.loss_impl = "fused_ce";
  fused.moe_impl = "grouped";
  CausalLM fast(fused);
  load_hf_weights(fast, dir + "/hf");
  EXPECT_TRUE(matches("fused-config logits", fast.logits(ids, at), ref.get("logits")));
  check_loss_and_grads(fast, ref, ids, targets, at, cat(c.name, " (fused kernels)"));
}

// kiln saves each case's model (random weights of its own), checks that the
// directory loads back into kiln bit for bit, and transformers loads every
// directory and matches kiln's logits and loss (one Python process for all).
TEST(HfInteropReverse, KilnToTransformers) {
  TempDir tmp;
  std::string pairs;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const std::string dir = tmp / c.name;
    ModelConfig config = case_config(c);
    std::unique_ptr<CausalLM> model = build_model(config, DType::f32, 77);
    // Perturb every parameter (norm scales and biases too), so that a
    // swapped or misnamed tensor shows in the logits; routers get a wide
    // spread so that the top-k choice is decisive.
    Generator g(78);
    for (auto& [name, p] : model->named_parameters()) {
      double std = name.ends_with("mlp.gate.weight") ? 0.3 : 0.05;
      *p = *p + normal(p->shape(), 0, std, g, p->dtype());
    }
    HfSaveOptions options;
    options.max_shard_bytes = c.save_shard_bytes;
    save_hf_model(*model, dir + "/model", options);
    if (c.save_shard_bytes < 1'000'000) {
      EXPECT_TRUE(fs::exists(dir + "/model/model.safetensors.index.json"));
      int shards = 0;
      for (const auto& e : fs::directory_iterator(dir + "/model"))
        shards += e.path().filename().string().starts_with("model-");
      EXPECT_GT(shards, 1) << "expected shards of at most " << c.save_shard_bytes << " bytes";
    }

    std::unique_ptr<CausalLM> back = load_hf_model(dir + "/model");
    auto a = model->named_parameters(), b = back->named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      EXPECT_EQ(a[i].second->to_vector<float>(), b[i].second->to_vector<float>()) << a[i].first;
    }

    std::vector<int64_t> v(2 * 12);
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7919 + 13) % config.vocab_size);
    Tensor ids = from_vector(v, {2, 12});
    ForwardOptions at;  // positions 200..211, as in hf_models.py
    at.positions = arange(200, 212).reshape({1, 12}).expand({2, 12}).contiguous();
    Tensor logits = model->logits(ids, at);
    Tensor loss = model->loss(ids, shifted_targets(ids), at);
    save_safetensors(
        dir + "/kiln_out.safetensors",
        {{"input_ids", ids}, {"position_ids", at.positions}, {"logits", logits}, {"loss", loss}});
    pairs += cat(" --pair \"", dir, "/model\" \"", dir, "/kiln_out.safetensors\"");
  }
  EXPECT_TRUE(test::run_oracle_script("hf_models.py", "check" + pairs, tmp / "check.log"));
}

INSTANTIATE_TEST_SUITE_P(Debug, HfInterop, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kiln
