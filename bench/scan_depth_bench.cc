// Compile cost against depth, with and without scan over layers: the CPU
// time to trace the graph trainer's whole step and compile it (compiler
// passes and the executable; for scans also their loop bodies, forward and
// backward), for the Llama debug block at 2, 8 and 32 layers. CPU time of
// this process, not wall time, so other load on the machine matters less;
// each figure is the fastest of 5 runs, after one warm-up run (first-use
// costs of the process are not compile costs). Prints the table and each
// depth's ratio to 2 layers.
//   build/bench/scan_depth_bench
#include <ctime>
#include <cstdio>

#include "kiln/data/loader.h"
#include "kiln/models/transformer.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/optim/adamw.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/scan_body.h"
#include "kiln/train/step.h"

using namespace kiln;

double cpu_seconds() { return double(std::clock()) / CLOCKS_PER_SEC; }

struct Cost {
  double trace = 0, compile = 0;
  size_t nodes = 0;
};

// Compiles `g` and, recursively, the body of every scan in it, bypassing
// the program caches (a repeated measurement would only time a lookup).
void compile_all(const ir::Graph& g) {
  Executable exe(compiler::optimize(prepare_for_device(g, kCPU), default_pass_options()), kCPU, {});
  for (const ir::Node& n : exe.graph().nodes())
    if (n.op->name == "scan") compile_all(*scan_body_graph(n.attrs.s("body")));
}

Cost measure(int64_t layers, bool scan) {
  ModelConfig c = model_config("llama3_debug");
  c.n_layers = layers;
  auto model = build_model(c, DType::f32, 0);
  std::vector<Tensor> masters = model->parameters();
  optim::AdamW adamw({}, masters.size());
  optim::AdamWState state = adamw.init(masters);
  train::StepOptions so;
  so.rung = train::Rung::graph_trainer;
  so.scan_layers = scan;
  train::TrainStep step(*model, {}, adamw, so);
  Generator gen(1);
  Tensor ids = (rand({4, 64}, gen) * double(c.vocab_size)).to(DType::i64);
  std::vector<data::Batch> batches{{ids, ids, {}, {}}};
  Cost cost;
  double t0 = cpu_seconds();
  ir::Graph g = step.graph(masters, state, batches);
  double t1 = cpu_seconds();
  compile_all(g);
  cost.trace = t1 - t0;
  cost.compile = cpu_seconds() - t1;
  cost.nodes = g.nodes().size();
  return cost;
}

int main() {
  std::printf("graph trainer step, llama3_debug blocks, CPU seconds\n");
  std::printf("%-9s %7s %8s %10s %11s %10s %14s\n", "stack", "layers", "nodes", "trace s",
              "compile s", "total s", "total / 2L");
  measure(2, true);
  for (bool scan : {false, true}) {
    double base = 0;
    for (int64_t layers : {2, 8, 32}) {
      Cost t = measure(layers, scan);
      for (int rep = 1; rep < 5; ++rep) {
        Cost again = measure(layers, scan);
        if (again.trace + again.compile < t.trace + t.compile) t = again;
      }
      double total = t.trace + t.compile;
      if (layers == 2) base = total;
      std::printf("%-9s %7lld %8zu %10.3f %11.3f %10.3f %13.2fx\n", scan ? "scan" : "unrolled",
                  (long long)layers, t.nodes, t.trace, t.compile, total, total / base);
    }
  }
}
