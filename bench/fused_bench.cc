// Fused elementwise bodies on 16M floats: the unfused eager sequence (one
// kernel and one full-size temporary per op) against one fused kernel run by
// the interpreter and by generated code, in GB/s of the body's own traffic
// (each input read once, each output written once). Two chains of 8 ops on
// one input: plain arithmetic (memory bound when unfused) and one with tanh
// and exp; and an AdamW update (4 inputs, 3 outputs, as the graph trainer
// fuses it: many operands, which generated code must still vectorise).
// Ratios to the unfused sequence are printed at the end.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/backend/cpu/fused/fused_kernel.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/tensor.h"

namespace {

using kiln::Tensor;
namespace fused = kiln::cpu::fused;

constexpr int64_t kN = 16 << 20;

// A fused body and the eager ops that compute the same.
struct Case {
  std::string name;
  std::string body;  // IR text; constants are full nodes of the full shape, as fusion emits them
  int inputs, outputs;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> eager;
  double bytes() const { return double(kN) * 4 * (inputs + outputs); }
};

// Builds bodies over f32[kN] values.
struct Body {
  kiln::ir::Graph g;
  kiln::ir::ValueId in() { return g.add_input({kiln::DType::f32, {kN}}); }
  kiln::ir::ValueId op(const char* name, std::vector<kiln::ir::ValueId> in) {
    return g.add_node(kiln::ir::get_op(name), std::move(in), {}).outputs[0];
  }
  kiln::ir::ValueId op(const char* name, kiln::ir::ValueId x, double k) {
    auto c = g.add_node(kiln::ir::get_op("full"), {}, {{"shape", kiln::ir::IntList{kN}}, {"value", k}});
    return op(name, {x, c.outputs[0]});
  }
  std::string text(std::vector<kiln::ir::ValueId> outputs) {
    g.set_outputs(std::move(outputs));
    return kiln::ir::to_text(g);
  }
};

// 8 ops on one input, each unary or with a constant (k; NaN: unary).
Case chain(std::string name, std::vector<std::pair<const char*, double>> ops) {
  Body b;
  auto v = b.in();
  for (auto [op, k] : ops) v = std::isnan(k) ? b.op(op, {v}) : b.op(op, v, k);
  auto eager = [ops](const std::vector<Tensor>& in) {
    Tensor v = in[0];
    for (auto [op, k] : ops) {
      std::string o = op;
      if (o == "mul") v = v * k;
      else if (o == "add") v = v + k;
      else if (o == "sub") v = v - k;
      else if (o == "maximum") v = kiln::maximum(v, kiln::scalar(k));
      else if (o == "minimum") v = kiln::minimum(v, kiln::scalar(k));
      else if (o == "tanh") v = kiln::tanh(v);
      else if (o == "exp") v = kiln::exp(v);
      else if (o == "sqrt") v = kiln::sqrt(v);
    }
    return std::vector<Tensor>{v};
  };
  return {std::move(name), b.text({v}), 1, 1, eager};
}

// AdamW at step t (bias corrections as constants): from parameter, gradient
// and moments, the new moments and parameter.
Case adamw() {
  constexpr double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  const double bc1 = 1 - std::pow(b1, 10), bc2 = std::sqrt(1 - std::pow(b2, 10));
  Body b;
  auto p = b.in(), g = b.in(), m = b.in(), v = b.in();
  auto m1 = b.op("add", {b.op("mul", m, b1), b.op("mul", g, 1 - b1)});
  auto v1 = b.op("add", {b.op("mul", v, b2), b.op("mul", b.op("mul", {g, g}), 1 - b2)});
  auto denom = b.op("add", b.op("div", b.op("sqrt", {v1}), bc2), eps);
  auto step = b.op("div", {b.op("mul", m1, lr / bc1), denom});
  auto p1 = b.op("sub", {b.op("mul", p, 1 - lr * wd), step});
  auto eager = [=](const std::vector<Tensor>& in) {
    Tensor m1 = in[2] * b1 + in[1] * (1 - b1);
    Tensor v1 = in[3] * b2 + in[1] * in[1] * (1 - b2);
    Tensor p1 = in[0] * (1 - lr * wd) - m1 * (lr / bc1) / (kiln::sqrt(v1) / bc2 + eps);
    return std::vector<Tensor>{m1, v1, p1};
  };
  return {"adamw", b.text({m1, v1, p1}), 4, 3, eager};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      chain("arith", {{"mul", 0.5}, {"add", 0.25}, {"maximum", -1.0}, {"mul", 1.5}, {"sub", 0.1},
                      {"minimum", 4.0}, {"mul", 0.75}, {"add", 1.0}}),
      chain("transcendental", {{"mul", 0.5}, {"tanh", NAN}, {"add", 0.25}, {"exp", NAN},
                               {"mul", 1.5}, {"sub", 0.1}, {"maximum", 0.0}, {"sqrt", NAN}}),
      adamw()};
  return all;
}

std::vector<Tensor> inputs(const Case& c) {
  std::vector<Tensor> in;
  for (int i = 0; i < c.inputs; ++i) in.push_back(kiln::full({kN}, 0.3 + 0.1 * i));
  return in;
}

// A graph of one fused node.
kiln::ir::Graph fused_graph(const Case& c) {
  kiln::ir::Graph g;
  std::vector<kiln::ir::ValueId> in;
  for (int i = 0; i < c.inputs; ++i) in.push_back(g.add_input({kiln::DType::f32, {kN}}));
  const auto& n = g.add_node(kiln::ir::get_op("fused"), in,
                             {{"body", c.body}, {"kind", std::string("elementwise")}});
  g.set_outputs(n.outputs);
  return g;
}

void BM_Unfused(benchmark::State& state, const Case* c) {
  kiln::EagerModeGuard strict(kiln::EagerMode::strict);
  std::vector<Tensor> in = inputs(*c);
  c->eager(in);  // warm-up: fills the caching allocator
  kiln::synchronize();
  for (auto _ : state) {
    auto out = c->eager(in);
    kiln::synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * c->bytes()));
}

void run_fused(benchmark::State& state, const Case* c, fused::CodegenMode mode) {
  kiln::EagerModeGuard strict(kiln::EagerMode::strict);
  fused::set_codegen_mode(mode);
  std::vector<Tensor> in = inputs(*c);
  kiln::ir::Graph g = fused_graph(*c);
  for (int warm = 0; warm < 2; ++warm) kiln::run_graph(g, in, "bench");  // plans (and builds)
  kiln::synchronize();
  if (mode == fused::CodegenMode::sync &&
      fused::codegen_status(c->body, "elementwise").state != fused::CodegenState::ready) {
    state.SkipWithError("code generation failed");
    return;
  }
  for (auto _ : state) {
    auto out = kiln::run_graph(g, in, "bench");
    kiln::synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * c->bytes()));
  fused::set_codegen_mode(std::nullopt);
}

void BM_Interpreter(benchmark::State& state, const Case* c) { run_fused(state, c, fused::CodegenMode::off); }
void BM_Generated(benchmark::State& state, const Case* c) { run_fused(state, c, fused::CodegenMode::sync); }

// Records each benchmark's time per iteration for the ratio table.
class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) seconds[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
  for (const Case* c = cases().data(); c != cases().data() + cases().size(); ++c) {
    benchmark::RegisterBenchmark(("unfused/" + c->name).c_str(), BM_Unfused, c)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("interpreter/" + c->name).c_str(), BM_Interpreter, c)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("generated/" + c->name).c_str(), BM_Generated, c)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nbodies on %lld floats: GB/s (inputs + outputs) and speed-up over unfused\n",
              (long long)kN);
  for (const Case* c = cases().data(); c != cases().data() + cases().size(); ++c) {
    auto find = [&](const std::string& k) {
      auto it = reporter.seconds.find(k + "/" + c->name + "/real_time");
      return it == reporter.seconds.end() ? 0.0 : it->second;
    };
    double u = find("unfused"), i = find("interpreter"), g = find("generated");
    if (u <= 0) continue;
    auto gbps = [c](double ms) { return ms > 0 ? c->bytes() / (ms * 1e-3) / 1e9 : 0.0; };
    std::printf("  %-15s unfused %6.1f GB/s | interpreter %6.1f GB/s (x%.2f) | generated %6.1f GB/s (x%.2f)\n",
                c->name.c_str(), gbps(u), gbps(i), i > 0 ? u / i : 0.0, gbps(g), g > 0 ? u / g : 0.0);
  }
  return 0;
}
