// bf16 GEMMs on the GPU: kiln's matmul (Tensor API, device queue, cached
// cuBLASLt algorithm) against one direct cuBLASLt call and torch.matmul
// (bench/cuda_gemm_torch.py, run as a subprocess with $KILN_PYTHON or
// python3), on 4096^3 and the GEMMs of a Llama 3 8B training step (8192
// tokens: the forward projections, and the backward's input and weight
// gradients), all over standard normal bf16 inputs. Prints TFLOP/s and the ratios kiln/cuBLASLt and kiln/torch
// (the issue asks kiln/torch >= 0.95). Built only with the CUDA backend.
#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench/cuda_timing.h"
#include "kiln/base/dtype.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/random.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/tensor.h"

namespace {

using kiln::DType;
using kiln::Tensor;

constexpr kiln::Device kCuda0{kiln::DeviceKind::cuda, 0};
using bench::best_seconds_per_call;

struct Gemm {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;  // a stored [K,M], b stored [N,K]
};

// Llama 3 8B: dim 4096, 8 KV heads of 128, FFN 14336, vocabulary 128256.
const Gemm kGemms[] = {
    {"square", 4096, 4096, 4096, false, false},
    {"q/o proj", 8192, 4096, 4096, false, true},
    {"k/v proj", 8192, 1024, 4096, false, true},
    {"gate/up proj", 8192, 14336, 4096, false, true},
    {"down proj", 8192, 4096, 14336, false, true},
    {"lm head", 8192, 128256, 4096, false, true},
    {"gate/up dX", 8192, 4096, 14336, false, false},
    {"gate/up dW", 14336, 4096, 8192, true, false},
    {"down dW", 4096, 14336, 8192, true, false},
};

double tflops(const Gemm& g, double seconds) {
  return 2.0 * double(g.m) * double(g.n) * double(g.k) / seconds / 1e12;
}

#define CHECK_LT(call)                                                           \
  do {                                                                           \
    cublasStatus_t s_ = (call);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
      std::fprintf(stderr, "%s failed: %s\n", #call, cublasLtGetStatusString(s_)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

double kiln_seconds(const Gemm& g) {
  kiln::Generator gen(1);
  Tensor ta = kiln::randn(g.ta ? kiln::Shape{g.k, g.m} : kiln::Shape{g.m, g.k}, gen, DType::bf16, kCuda0);
  Tensor tb = kiln::randn(g.tb ? kiln::Shape{g.n, g.k} : kiln::Shape{g.k, g.n}, gen, DType::bf16, kCuda0);
  kiln::synchronize(kCuda0);
  return best_seconds_per_call([&](int calls) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) kiln::matmul(ta, tb, g.ta, g.tb);
    kiln::synchronize(kCuda0);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
}

// Fills n bf16 values at device address p with standard normal values (a
// block of them drawn once, repeated): products of zeros or of constants
// draw less power than a model's, and run faster than they would.
void fill_normal(void* p, size_t n) {
  static const std::vector<kiln::bf16> block = [] {
    kiln::Generator gen(2);
    return kiln::randn({1 << 20}, gen, DType::bf16).to_vector<kiln::bf16>();
  }();
  for (size_t at = 0; at < n; at += block.size())
    CHECK_CUDA(cudaMemcpy(static_cast<kiln::bf16*>(p) + at, block.data(),
                          std::min(block.size(), n - at) * sizeof(kiln::bf16), cudaMemcpyHostToDevice));
}

// The reference: the product as a careful direct caller would make it,
// row-major C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T.
double cublaslt_seconds(const Gemm& g) {
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasLtHandle_t handle;
  CHECK_LT(cublasLtCreate(&handle));
  void *a, *b, *c, *workspace;
  const size_t ws_bytes = size_t(32) << 20;
  CHECK_CUDA(cudaMalloc(&a, size_t(g.m * g.k) * 2));
  CHECK_CUDA(cudaMalloc(&b, size_t(g.k * g.n) * 2));
  CHECK_CUDA(cudaMalloc(&c, size_t(g.m * g.n) * 2));
  CHECK_CUDA(cudaMalloc(&workspace, ws_bytes));
  fill_normal(a, size_t(g.m * g.k));
  fill_normal(b, size_t(g.k * g.n));

  cublasLtMatmulDesc_t desc;
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t op_b = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
  cublasLtMatrixLayout_t lb, la, lc;
  // b stored [K,N] (or [N,K]) row-major is column-major N x K (K x N).
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, g.tb ? g.k : g.n, g.tb ? g.n : g.k, g.tb ? g.k : g.n));
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g.ta ? g.m : g.k, g.ta ? g.k : g.m, g.ta ? g.m : g.k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, g.n, g.m, g.n));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t max_ws = ws_bytes;
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(handle, desc, lb, la, lc, lc, pref, 1, &result, &found));
  if (found == 0) {
    std::fprintf(stderr, "cuBLASLt: no algorithm for %s\n", g.what);
    std::exit(1);
  }
  const float alpha = 1, beta = 0;
  double s;
  {
    bench::EventPair ev;
    s = best_seconds_per_call([&](int calls) {
      CHECK_CUDA(cudaEventRecord(ev.start, stream));
      for (int i = 0; i < calls; ++i)
        CHECK_LT(cublasLtMatmul(handle, desc, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &result.algo,
                                workspace, result.workspaceSize, stream));
      CHECK_CUDA(cudaEventRecord(ev.end, stream));
      return ev.seconds();
    });
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
  for (void* p : {a, b, c, workspace}) cudaFree(p);
  cudaStreamDestroy(stream);
  return s;
}

// torch.matmul's seconds per call by shape, from the helper script; empty
// (and said so) when torch or its GPU is unavailable.
std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, double> torch_seconds() {
  const char* py = std::getenv("KILN_PYTHON");
  std::string cmd = std::string(py ? py : "python3") + " " KILN_BENCH_DIR "/cuda_gemm_torch.py";
  for (const Gemm& g : kGemms) {
    char spec[96];
    std::snprintf(spec, sizeof spec, " %lld,%lld,%lld,%d,%d", (long long)g.m, (long long)g.n,
                  (long long)g.k, int(g.ta), int(g.tb));
    cmd += spec;
  }
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, double> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    long long m, n, k;
    int ta, tb;
    double s;
    if (std::sscanf(line, "torch %lld %lld %lld %d %d %lf", &m, &n, &k, &ta, &tb, &s) == 6)
      out[{m, n, k, ta != 0, tb != 0}] = s;
    else
      std::printf("torch: %s", line);
  }
  if (pclose(p) != 0 || out.empty()) std::printf("torch.matmul: unavailable (%s failed)\n", cmd.c_str());
  return out;
}

}  // namespace

int main() {
  kiln::Backend* cuda = kiln::find_backend(kiln::DeviceKind::cuda);
  if (!cuda || cuda->device_count() == 0) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  std::printf("%s\n%s\n", cuda->describe(0).c_str(), cuda->gemm_isa(0).c_str());
  auto torch = torch_seconds();
  std::printf("%-13s %-20s %10s %10s %10s %9s %9s\n", "bf16 GEMM", "MxNxK", "kiln", "cuBLASLt",
              "torch", "kiln/Lt", "kiln/torch");
  std::printf("%-13s %-20s %10s %10s %10s\n", "", "", "TFLOP/s", "TFLOP/s", "TFLOP/s");
  for (const Gemm& g : kGemms) {
    double k = kiln_seconds(g);
    kiln::empty_cache(kCuda0);  // leave the direct call the memory kiln cached
    double lt = cublaslt_seconds(g);
    std::string shape = std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
                        (g.ta ? " aT" : "") + (g.tb ? " bT" : "");
    auto t = torch.find({g.m, g.n, g.k, g.ta, g.tb});
    char torch_col[32] = "-", ratio_col[32] = "-";
    if (t != torch.end()) {
      std::snprintf(torch_col, sizeof torch_col, "%.1f", tflops(g, t->second));
      std::snprintf(ratio_col, sizeof ratio_col, "%.3f", t->second / k);
    }
    std::printf("%-13s %-20s %10.1f %10.1f %10s %9.3f %9s\n", g.what, shape.c_str(), tflops(g, k),
                tflops(g, lt), torch_col, lt / k, ratio_col);
  }
  return 0;
}
