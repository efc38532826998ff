// Fused elementwise chains on 16M floats: the unfused eager sequence (one
// kernel and one full-size temporary per op) against one fused kernel run by
// the interpreter and by generated code, in GB/s of the chain's own traffic
// (the input read once, the output written once). Two chains of 8 ops: plain
// arithmetic (memory bound when unfused) and one with tanh and exp. Ratios
// to the unfused sequence are printed at the end.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

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
constexpr double kBytes = double(kN) * 8;  // f32 in + f32 out

// The chains as IR bodies; the constants are full nodes of the full shape
// (what the fusion pass emits).
struct Chain {
  std::string name;
  std::vector<std::pair<const char*, double>> ops;  // op with a constant operand (NaN: unary)
};

const Chain kArith{"arith", {{"mul", 0.5}, {"add", 0.25}, {"maximum", -1.0}, {"mul", 1.5},
                             {"sub", 0.1}, {"minimum", 4.0}, {"mul", 0.75}, {"add", 1.0}}};
const Chain kTransc{"transcendental", {{"mul", 0.5}, {"tanh", NAN}, {"add", 0.25}, {"exp", NAN},
                                       {"mul", 1.5}, {"sub", 0.1}, {"maximum", 0.0}, {"sqrt", NAN}}};

std::string body_of(const Chain& c) {
  kiln::ir::Graph g;
  auto v = g.add_input({kiln::DType::f32, {kN}});
  for (auto [op, k] : c.ops) {
    std::vector<kiln::ir::ValueId> in{v};
    if (!std::isnan(k))
      in.push_back(g.add_node(kiln::ir::get_op("full"), {},
                              {{"shape", kiln::ir::IntList{kN}}, {"value", k}})
                       .outputs[0]);
    v = g.add_node(kiln::ir::get_op(op), in, {}).outputs[0];
  }
  g.set_outputs({v});
  return kiln::ir::to_text(g);
}

Tensor input() { return kiln::full({kN}, 0.3); }

// The unfused eager sequence, as a user writes it.
Tensor eager(const Chain& c, const Tensor& x) {
  Tensor v = x;
  for (auto [op, k] : c.ops) {
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
  return v;
}

// A graph of one fused node.
kiln::ir::Graph fused_graph(const std::string& body) {
  kiln::ir::Graph g;
  auto x = g.add_input({kiln::DType::f32, {kN}});
  const auto& n = g.add_node(kiln::ir::get_op("fused"), {x}, {{"body", body}, {"kind", std::string("elementwise")}});
  g.set_outputs(n.outputs);
  return g;
}

void BM_Unfused(benchmark::State& state, const Chain* c) {
  kiln::EagerModeGuard strict(kiln::EagerMode::strict);
  Tensor x = input();
  eager(*c, x);  // warm-up: fills the caching allocator
  kiln::synchronize();
  for (auto _ : state) {
    Tensor y = eager(*c, x);
    kiln::synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kBytes));
}

void run_fused(benchmark::State& state, const Chain* c, fused::CodegenMode mode) {
  kiln::EagerModeGuard strict(kiln::EagerMode::strict);
  fused::set_codegen_mode(mode);
  Tensor x = input();
  std::string body = body_of(*c);
  kiln::ir::Graph g = fused_graph(body);
  std::vector<Tensor> in{x};
  for (int warm = 0; warm < 2; ++warm) kiln::run_graph(g, in, "bench");  // plans (and builds)
  kiln::synchronize();
  if (mode == fused::CodegenMode::sync &&
      fused::codegen_status(body, "elementwise").state != fused::CodegenState::ready) {
    state.SkipWithError("code generation failed");
    return;
  }
  for (auto _ : state) {
    auto out = kiln::run_graph(g, in, "bench");
    kiln::synchronize();
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kBytes));
  fused::set_codegen_mode(std::nullopt);
}

void BM_Interpreter(benchmark::State& state, const Chain* c) { run_fused(state, c, fused::CodegenMode::off); }
void BM_Generated(benchmark::State& state, const Chain* c) { run_fused(state, c, fused::CodegenMode::sync); }

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
  for (const Chain* c : {&kArith, &kTransc}) {
    benchmark::RegisterBenchmark(("unfused/" + c->name).c_str(), BM_Unfused, c)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("interpreter/" + c->name).c_str(), BM_Interpreter, c)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("generated/" + c->name).c_str(), BM_Generated, c)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nchain of 8 ops on %lld floats: GB/s (input + output) and speed-up over unfused\n",
              (long long)kN);
  for (const Chain* c : {&kArith, &kTransc}) {
    auto find = [&](const std::string& k) {
      auto it = reporter.seconds.find(k + "/" + c->name + "/real_time");
      return it == reporter.seconds.end() ? 0.0 : it->second;
    };
    double u = find("unfused"), i = find("interpreter"), g = find("generated");
    if (u <= 0) continue;
    auto gbps = [](double ms) { return ms > 0 ? kBytes / (ms * 1e-3) / 1e9 : 0.0; };
    std::printf("  %-15s unfused %6.1f GB/s | interpreter %6.1f GB/s (x%.2f) | generated %6.1f GB/s (x%.2f)\n",
                c->name.c_str(), gbps(u), gbps(i), i > 0 ? u / i : 0.0, gbps(g), g > 0 ? u / g : 0.0);
  }
  return 0;
}
