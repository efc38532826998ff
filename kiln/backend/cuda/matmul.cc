// The matmul kernel on CUDA: cuBLASLt, over the operands as they are stored
// (gemm_plan.h), strided inputs included. bf16 and f16 products accumulate in f32, f32 ones in f32
// (no TF32), f64 ones in f64. Reproducible: each problem's algorithm is
// chosen once, by cuBLASLt's heuristic restricted to algorithms that sum
// each dot product in one fixed order (no split-K with a separate reduction),
// and reused for every later product of that problem.
#include <cuda_runtime.h>

#include <map>
#include <utility>
#include <memory>
#include <optional>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cublaslt.h"
#include "kiln/backend/cuda/dense_gemm.h"
#include "kiln/backend/cuda/gemm_plan.h"
#include "kiln/backend/cuda/scratch.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/backend/cuda/strided_copy.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

constexpr uint64_t kMaxWorkspace = kGemmWorkspace;

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: fail("matmul on CUDA: dtype ", dtype_name(t), " is not supported; use f32, bf16, f16 or f64");
  }
}

template <class T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, T v) {
  KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
}
template <class T>
void set(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, T v) {
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof v));
}
template <class T>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, T v) {
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v));
}

std::string describe(const GemmProblem& p) {
  return cat(dtype_name(p.dtype), p.out_dtype != p.dtype ? cat(" to ", dtype_name(p.out_dtype)) : "",
             " [", p.n, ",", p.k, "] x [", p.k, ",", p.m, "]",
             p.batch > 1 ? cat(" in a batch of ", p.batch) : std::string());
}

// One problem's descriptors and algorithm, kept for the thread's life.
struct Prepared {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;

  explicit Prepared(const GemmProblem& p) {
    try {
      prepare(p);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Prepared() { release(); }
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;

 private:
  void prepare(const GemmProblem& p) {
    const bool f64 = p.dtype == DType::f64;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                               f64 ? CUDA_R_64F : CUDA_R_32F));
    set(desc, CUBLASLT_MATMUL_DESC_TRANSA, p.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N);
    set(desc, CUBLASLT_MATMUL_DESC_TRANSB, p.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N);
    const cudaDataType_t type = data_type(p.dtype);
    first = layout(type, p.first, p.batch);
    second = layout(type, p.second, p.batch);
    out = layout(data_type(p.out_dtype), p.out, p.batch);

    struct Preference {
      cublasLtMatmulPreference_t p = nullptr;
      ~Preference() {
        if (p) cublasLtMatmulPreferenceDestroy(p);
      }
    } pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
    set(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspace);
    // A K split's partial sums add up in f32 (f64): in place in the output
    // (ordered by counters) where it is that wide, else in the workspace in
    // the compute type, never rounded to a 16-bit output between parts.
    const bool wide_out = itemsize(p.out_dtype) >= 4;
    set(pref.p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
        uint32_t(CUBLASLT_REDUCTION_SCHEME_NONE | (wide_out ? CUBLASLT_REDUCTION_SCHEME_INPLACE
                                                            : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)));
    set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(p.first.align));
    set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(p.second.align));
    set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(p.out.align));
    set(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(p.out.align));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), desc, first, second,
                                                           out, out, pref.p, 1, &result, &found);
    KILN_CHECK(status == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
               "matmul on CUDA: cuBLASLt has no algorithm for the ", describe(p), " product (",
               cublasLtGetStatusString(status == CUBLAS_STATUS_SUCCESS && found > 0 ? result.state
                                                                                  : status),
               "); this is a kiln bug: report the shapes");
    algo = result.algo;
    workspace = result.workspaceSize;
  }

  void release() {
    for (cublasLtMatrixLayout_t l : {first, second, out})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (desc) cublasLtMatmulDescDestroy(desc);
    first = second = out = nullptr;
    desc = nullptr;
  }

  static cublasLtMatrixLayout_t layout(cudaDataType_t type, const GemmMatrix& m, int64_t batch) {
    cublasLtMatrixLayout_t l = nullptr;
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, uint64_t(m.rows), uint64_t(m.cols), m.ld));
    try {
      if (batch > 1) {
        set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t(batch));
        set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, m.batch_stride);
      }
    } catch (...) {
      cublasLtMatrixLayoutDestroy(l);
      throw;
    }
    return l;
  }
};

// Per queue thread, hence per device (a choice is only valid on its GPU).
const Prepared& prepared(const GemmProblem& p) {
  thread_local std::map<GemmProblem, std::unique_ptr<Prepared>> cache;
  auto it = cache.find(p);
  if (it != cache.end()) return *it->second;
  if (cache.size() >= 4096) cache.clear();  // bounds memory when shapes keep changing
  return *cache.emplace(p, std::make_unique<Prepared>(p)).first->second;
}

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Runs a prepared problem once: cuBLASLt's first operand is kiln's b.
void launch(const Prepared& g, DType dtype, const void* a, const void* b, void* c, bool accumulate,
            void* workspace) {
  const float alpha32 = 1, beta32 = accumulate ? 1 : 0;
  const double alpha64 = 1, beta64 = accumulate ? 1 : 0;
  const bool f64 = dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  KILN_CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), g.desc, alpha, b, g.first, a, g.second, beta,
                                   c, g.out, c, g.out, &g.algo, workspace, g.workspace,
                                   current_stream()));
}

void matmul_kernel(const KernelArgs& args) {
  TensorRef a = args.in[0], b = args.in[1];
  const TensorRef& c = args.out[0];
  cudaStream_t stream = current_stream();
  const size_t size = itemsize(c.dtype);
  // Operands cuBLASLt cannot read in place (an expanded matrix dim, a
  // strided slice of columns) are copied, dense, into the scratch buffer
  // ahead of the workspace; transposed views and any batch strides are not.
  const bool copy_a = !gemm_layout_ok(a), copy_b = !gemm_layout_ok(b);
  std::optional<Scratch> held;
  char* copies = nullptr;
  size_t copied = 0;
  if (copy_a || copy_b) {
    const size_t bytes_a = copy_a ? round_up(size_t(a.numel()) * size) : 0;
    const size_t bytes_b = copy_b ? round_up(size_t(b.numel()) * size) : 0;
    copied = bytes_a + bytes_b;
    copies = held.emplace(copied + kMaxWorkspace).as();
    for (auto [t, at] : {std::pair{&a, copy_a ? copies : nullptr},
                         std::pair{&b, copy_b ? copies + bytes_a : nullptr}}) {
      if (!at) continue;
      TensorRef dense{at, t->dtype, t->shape, contiguous_strides(t->shape)};
      strided_copy(dense, *t);
      *t = dense;
    }
  }
  const GemmPlan plan = plan_gemm(a, b, c, args.attrs.b("transpose_a"), args.attrs.b("transpose_b"));
  const GemmProblem& p = plan.problem;
  if (p.k == 0) {  // an empty sum: zeros (the output is contiguous)
    KILN_CUDA_CHECK(cudaMemsetAsync(c.data, 0, size_t(c.numel()) * size, stream));
    return;
  }
  const Prepared& g = prepared(p);
  void* workspace = !g.workspace ? nullptr : copies ? copies + copied : held.emplace(g.workspace).data();
  auto at = [size](void* base, int64_t offset) { return static_cast<char*>(base) + offset * int64_t(size); };
  for (const GemmLaunch& l : plan.launches)
    launch(g, p.dtype, at(a.data, l.a), at(b.data, l.b), at(c.data, l.c), false, workspace);
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "matmul", {matmul_kernel, true}},
};

}  // namespace

void dense_gemm(const DenseGemm& g) {
  if (g.m == 0 || g.n == 0) return;
  KILN_CHECK(g.k > 0, "dense_gemm (CUDA): an empty sum (k = 0) is the caller's to handle");
  const GemmProblem p = plan_dense_gemm(g);
  const Prepared& prep = prepared(p);
  launch(prep, p.dtype, g.a, g.b, g.c, g.accumulate, prep.workspace ? g.workspace : nullptr);
}
}  // namespace kiln::cuda
