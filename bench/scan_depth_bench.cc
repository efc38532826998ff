// Compile time against depth, with and without scan over layers: the graph
// trainer's first step (trace, compile, run) minus a steady step, for the
// Llama debug block at 2, 8 and 32 layers, in one process with the
// persistent compile cache off. Prints the table and each depth's ratio to
// 2 layers.
//   build/bench/scan_depth_bench [--seq 64] [--batch 4]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kiln/data/loader.h"
#include "kiln/models/transformer.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/optim/adamw.h"
#include "kiln/train/step.h"

using namespace kiln;

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Timing {
  double first, steady;
  double compile() const { return first - steady; }
};

Timing measure(int64_t layers, bool scan, int64_t batch, int64_t seq) {
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
  Generator g(1);
  Tensor ids = (rand({batch, seq}, g) * double(c.vocab_size)).to(DType::i64);
  std::vector<data::Batch> batches{{ids, ids, {}, {}}};
  Timing t;
  t.first = seconds([&] { step.run(masters, state, batches, 1e-3); });
  t.steady = 1e30;
  for (int i = 0; i < 3; ++i)
    t.steady = std::min(t.steady, seconds([&] { step.run(masters, state, batches, 1e-3); }));
  return t;
}

int main(int argc, char** argv) {
  int64_t seq = 64, batch = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seq")) seq = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
  }
  setenv("KILN_CACHE", "off", 1);  // measure compiling, not loading
  std::printf("graph trainer, llama3_debug block, batch %lld x seq %lld\n", (long long)batch,
              (long long)seq);
  std::printf("%-9s %7s %12s %12s %14s\n", "stack", "layers", "compile s", "step s",
              "compile / 2L");
  for (bool scan : {false, true}) {
    double base = 0;
    for (int64_t layers : {2, 8, 32}) {
      Timing t = measure(layers, scan, batch, seq);
      if (layers == 2) base = t.compile();
      std::printf("%-9s %7lld %12.3f %12.4f %13.2fx\n", scan ? "scan" : "unrolled",
                  (long long)layers, t.compile(), t.steady, t.compile() / base);
    }
  }
}
