// kiln's matmul (Tensor API, device queue, primitive cache) against the same
// product as one direct oneDNN matmul call, on square and transformer-MLP
// shapes in f32 and bf16. kiln should be within 10% of the direct call
// (counter kiln/onednn >= 0.9). Threads: KILN_NUM_THREADS (default: every
// hardware thread), for both.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <dnnl.hpp>
#include <string>

#include "kiln/base/dtype.h"
#include "kiln/ops/matmul.h"
#include "kiln/runtime/tensor.h"
#include "kiln/runtime/threads.h"

namespace {

struct Shape3 {
  int64_t m, n, k;
  bool ta, tb;
};

double gflop(const Shape3& s) { return 2.0 * double(s.m) * double(s.n) * double(s.k) / 1e9; }

// kiln's call: through the Tensor API and the device queue.
struct KilnGemm {
  Shape3 s;
  kiln::Tensor a, b;
  KilnGemm(Shape3 shape, kiln::DType dtype) : s(shape) {
    using kiln::Shape;
    a = kiln::full(s.ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, 0.01, dtype);
    b = kiln::full(s.tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, 0.01, dtype);
  }
  void run() {
    kiln::matmul(a, b, s.ta, s.tb);
    kiln::synchronize();
  }
};

// The reference: one primitive made up front and executed directly, the
// transposes given as strides, as a careful oneDNN caller would.
struct DirectGemm {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  DirectGemm(Shape3 s, kiln::DType dtype) {
    using md = dnnl::memory::desc;
    using dims = dnnl::memory::dims;
    using type = dnnl::memory::data_type;
    type dt = dtype == kiln::DType::bf16 ? type::bf16 : type::f32;
    omp_set_num_threads(kiln::num_threads());
    md a_md({s.m, s.k}, dt, s.ta ? dims{1, s.m} : dims{s.k, 1});
    md b_md({s.k, s.n}, dt, s.tb ? dims{1, s.k} : dims{s.n, 1});
    md c_md({s.m, s.n}, dt, dims{s.n, 1});
    prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine));
    a = dnnl::memory(a_md, engine);
    b = dnnl::memory(b_md, engine);
    c = dnnl::memory(c_md, engine);
    // 0.01 in f32 or bf16, like kiln's inputs.
    for (dnnl::memory* mem : {&a, &b}) {
      size_t bytes = mem->get_desc().get_size();
      if (dt == type::f32) {
        float* p = static_cast<float*>(mem->get_data_handle());
        for (size_t i = 0; i < bytes / 4; ++i) p[i] = 0.01f;
      } else {
        uint16_t* p = static_cast<uint16_t*>(mem->get_data_handle());
        for (size_t i = 0; i < bytes / 2; ++i) p[i] = kiln::bf16(0.01f).bits;
      }
    }
  }
  void run() {
    prim.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream.wait();
  }
};

template <class G>
double seconds(G& g) {
  auto start = std::chrono::steady_clock::now();
  g.run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Each iteration runs kiln's call and the direct call back to back, so both
// see the same machine load; the counters are each one's best call.
void kiln_vs_onednn(benchmark::State& state, Shape3 s, kiln::DType dtype) {
  KilnGemm kiln_gemm(s, dtype);
  DirectGemm direct(s, dtype);
  kiln_gemm.run();
  direct.run();
  double best_kiln = INFINITY, best_direct = INFINITY;
  for (auto _ : state) {
    best_kiln = std::min(best_kiln, seconds(kiln_gemm));
    best_direct = std::min(best_direct, seconds(direct));
  }
  state.counters["kiln_GFLOP/s"] = gflop(s) / best_kiln;
  state.counters["onednn_GFLOP/s"] = gflop(s) / best_direct;
  state.counters["kiln/onednn"] = best_direct / best_kiln;
  state.counters["threads"] = kiln::num_threads();
}

}  // namespace

int main(int argc, char** argv) {
  const Shape3 shapes[] = {{2048, 2048, 2048, false, false},
                           {4096, 768, 3072, false, false},
                           {4096, 768, 3072, false, true},
                           {4096, 768, 3072, true, false}};
  for (kiln::DType dtype : {kiln::DType::f32, kiln::DType::bf16})
    for (const Shape3& s : shapes) {
      std::string name = std::string(kiln::dtype_name(dtype)) + "/" + std::to_string(s.m) + "x" +
                         std::to_string(s.n) + "x" + std::to_string(s.k) + "_" +
                         (s.ta ? "T" : "N") + (s.tb ? "T" : "N");
      benchmark::RegisterBenchmark(name.c_str(), kiln_vs_onednn, s, dtype)
          ->MinTime(3)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
