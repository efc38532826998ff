// The matmul kernel. f32 products run as fixed blocks of each output matrix,
// each one oneDNN matmul on one thread over the whole of k, so their bits
// never depend on the thread count: oneDNN's own threading does
// not promise that (on AVX2 CPUs it splits k across threads). bf16 and f16
// run oneDNN's matmul primitive where the CPU multiplies them natively, with
// transposes passed as swapped strides and batch broadcasting as size-1
// dims, and are widened to f32 elsewhere (matmul_path.h); f64 runs a plain
// loop, which is what gradient checks use.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/backend/cpu/onednn.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

using dims = dnnl::memory::dims;

// One operand as the product sees it: padded with leading size-1 dims to
// the output's rank, its transpose flag applied by swapping the last two
// dims and strides (in elements).
struct Operand {
  char* data;
  dims shape, strides;
};

Operand operand(const TensorRef& t, bool transpose, int rank) {
  Operand o{static_cast<char*>(t.data), t.shape.vec(), t.strides.vec()};
  int r = t.rank();
  if (transpose) {
    std::swap(o.shape[r - 2], o.shape[r - 1]);
    std::swap(o.strides[r - 2], o.strides[r - 1]);
  }
  // A padded dim's stride is the operand's whole extent, as a dense layout's would be.
  int64_t extent = 1;
  for (int i = 0; i < r; ++i) extent = std::max(extent, o.shape[i] * o.strides[i]);
  o.shape.insert(o.shape.begin(), rank - r, 1);
  o.strides.insert(o.strides.begin(), rank - r, extent);
  return o;
}

// Creating a primitive costs far more than a small product, so each layout
// is prepared once. oneDNN sizes its work split by the thread count at
// creation, which is therefore part of the key.
PreparedMatmul prepare(DType dtype, const Operand& a, const Operand& b, const Operand& c,
                       int threads) {
  // Never destroyed (see onednn_engine).
  static auto* mu = new std::mutex;
  static auto* cache = new std::map<std::vector<int64_t>, PreparedMatmul>;
  std::vector<int64_t> key{int64_t(dtype), threads};
  for (const Operand* o : {&a, &b, &c}) {
    key.insert(key.end(), o->shape.begin(), o->shape.end());
    key.insert(key.end(), o->strides.begin(), o->strides.end());
  }
  std::lock_guard lock(*mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  PreparedMatmul p;
  if (auto type = onednn_type(dtype))
    p = prepare_matmul(dnnl::memory::desc(a.shape, *type, a.strides),
                       dnnl::memory::desc(b.shape, *type, b.strides),
                       dnnl::memory::desc(c.shape, *type, c.strides), {},
                       cat("matmul: a ", dtype_name(dtype), " product of ", Dims(a.shape), " and ",
                           Dims(b.shape)));
  if (cache->size() >= 4096) cache->clear();  // bounds memory when shapes keep changing
  cache->emplace(std::move(key), p);
  return p;
}

// The loop for f64, which oneDNN lacks. Each output row is accumulated in
// column blocks, over k in order, so results do not depend on the thread
// count.
void run_loop(const Operand& a, const Operand& b, const Operand& c) {
  constexpr int64_t kBlock = 256;
  constexpr int64_t s = sizeof(double);
  const int r = int(c.shape.size());
  const int64_t m = c.shape[r - 2], n = c.shape[r - 1], k = a.shape[r - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= c.shape[d];
  parallel_for(batches * m, n * k, [&](int64_t begin, int64_t end) {
    double acc[kBlock];
    for (int64_t row = begin; row < end; ++row) {
      int64_t batch = row / m, i = row % m;
      // Element offsets of this batch; size-1 (broadcast) dims stay at 0.
      int64_t ao = 0, bo = 0, co = 0;
      int64_t rest = batch;
      for (int d = r - 3; d >= 0; --d) {
        int64_t idx = rest % c.shape[d];
        rest /= c.shape[d];
        if (a.shape[d] != 1) ao += idx * a.strides[d];
        if (b.shape[d] != 1) bo += idx * b.strides[d];
        co += idx * c.strides[d];
      }
      const char* arow = a.data + (ao + i * a.strides[r - 2]) * s;
      char* crow = c.data + (co + i * c.strides[r - 2]) * s;
      for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
        int64_t jn = std::min(kBlock, n - j0);
        std::fill(acc, acc + jn, 0.0);
        for (int64_t p = 0; p < k; ++p) {
          double av = load<double>(arow + p * a.strides[r - 1] * s);
          const char* brow = b.data + (bo + p * b.strides[r - 2] + j0 * b.strides[r - 1]) * s;
          for (int64_t j = 0; j < jn; ++j) acc[j] += av * load<double>(brow + j * b.strides[r - 1] * s);
        }
        for (int64_t j = 0; j < jn; ++j) store<double>(crow + (j0 + j) * c.strides[r - 1] * s, acc[j]);
      }
    }
  });
}

// out = op(a) @ op(b) by oneDNN; false where it has no primitive for this.
bool run_onednn(const TensorRef& a_ref, bool ta, const TensorRef& b_ref, bool tb, const TensorRef& out) {
  const int rank = out.rank();
  Operand a = operand(a_ref, ta, rank), b = operand(b_ref, tb, rank), c = operand(out, false, rank);
  PreparedMatmul p = prepare(out.dtype, a, b, c, use_threads());
  if (!p.primitive) return false;
  run_matmul(p, a.data, b.data, c.data);
  return true;
}

// c = a @ b by a oneDNN primitive made for, and run on, the calling thread
// alone.
void one_thread_product(const Operand& a, const Operand& b, const Operand& c) {
  on_one_thread([&] {
    PreparedMatmul p = prepare(DType::f32, a, b, c, 1);
    KILN_CHECK(p.primitive, "matmul: oneDNN has no f32 primitive for a ", Dims(a.shape), " x ",
               Dims(b.shape), " block");
    run_matmul(p, a.data, b.data, c.data);
  });
}

// out = op(a) @ op(b) in f32 over dense operands (batch dims broadcast where
// one has size 1): each output matrix is cut into fixed blocks of whole rows,
// each one oneDNN product on one thread over the whole of k. Whole rows keep
// op(b) and the block of the output dense; blocks of up to kRows rows, as
// fewer ran at half speed a core (oneDNN 2.7 on an AVX2 EPYC, 2048^3: 512
// rows 79 GFLOP/s, 128 rows or 512 columns 38-40). But a matrix is cut into
// at least kMinBlocks blocks of kMinRows rows or more: whole, a weight
// gradient (m = dim = 256) ran on one thread. The blocks of a matrix are of
// equal size, so threads share them evenly, and the cut depends on the
// shapes alone, never on the thread count.
void run_blocked(const TensorRef& a, bool ta, const TensorRef& b, bool tb, const TensorRef& out) {
  constexpr int64_t kRows = 512, kMinBlocks = 2, kMinRows = 64;
  const int r = out.rank(), ra = a.rank(), rb = b.rank();
  const int64_t m = out.shape[r - 2], n = out.shape[r - 1];
  if (m == 0 || n == 0) return;
  const int64_t per_batch =
      std::clamp<int64_t>(m / kMinRows, 1, std::max<int64_t>(kMinBlocks, (m + kRows - 1) / kRows));
  const int64_t block_rows = (m + per_batch - 1) / per_batch;
  // op(a) is [m, k]; lda and ldb are a's and b's row strides as stored.
  const int64_t k = ta ? a.shape[ra - 2] : a.shape[ra - 1], lda = a.shape[ra - 1],
                ldb = b.shape[rb - 1];
  // Each batch's first element in a and b: dense strides, 0 where broadcast.
  const int batch_rank = r - 2;
  std::vector<int64_t> a_step(size_t(batch_rank), 0), b_step(size_t(batch_rank), 0);
  int64_t a_size = a.shape[ra - 2] * a.shape[ra - 1], b_size = b.shape[rb - 2] * b.shape[rb - 1];
  for (int d = batch_rank - 1; d >= 0; --d) {
    const int da = d - (r - ra), db = d - (r - rb);
    if (da >= 0 && a.shape[da] != 1) a_step[size_t(d)] = a_size;
    if (db >= 0 && b.shape[db] != 1) b_step[size_t(d)] = b_size;
    if (da >= 0) a_size *= a.shape[da];
    if (db >= 0) b_size *= b.shape[db];
  }
  int64_t batches = 1;
  for (int d = 0; d < batch_rank; ++d) batches *= out.shape[d];
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* cp = out.ptr<float>();
  parallel_for(batches * per_batch, block_rows * n * k,
               [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t batch = blk / per_batch, ao = 0, bo = 0;
      for (int d = batch_rank - 1; d >= 0; --d) {
        const int64_t idx = batch % out.shape[d];
        batch /= out.shape[d];
        ao += idx * a_step[size_t(d)];
        bo += idx * b_step[size_t(d)];
      }
      const int64_t r0 = blk % per_batch * block_rows, rows = std::min(block_rows, m - r0);
      // op(a)'s rows r0.. and op(b), as strided 2-D views.
      Operand ab{const_cast<char*>(reinterpret_cast<const char*>(ap + ao + (ta ? r0 : r0 * lda))),
                 {rows, k}, {ta ? 1 : lda, ta ? lda : 1}};
      Operand bb{const_cast<char*>(reinterpret_cast<const char*>(bp + bo)), {k, n},
                 {tb ? 1 : ldb, tb ? ldb : 1}};
      Operand cb{reinterpret_cast<char*>(cp + (blk / per_batch) * m * n + r0 * n), {rows, n}, {n, 1}};
      one_thread_product(ab, bb, cb);
    }
  });
}

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// A dense f32 tensor of `shape` in `buffer`.
TensorRef dense_f32(const Shape& shape, std::vector<float>& buffer) {
  buffer.resize(size_t(shape.numel()));
  return {buffer.data(), DType::f32, shape, contiguous_strides(shape)};
}

// `t`'s values as f32 in `buffer`, laid out densely.
TensorRef widened(const TensorRef& t, std::vector<float>& buffer) {
  TensorRef w = dense_f32(t.shape, buffer);
  visit_floating(t.dtype, [&](auto tag) { map<float, decltype(tag)>(w, [](float x) { return x; }, {&t}); });
  return w;
}

// out = op(a) @ op(b) for bf16/f16 through f32 copies: the products are exact
// in f32 and accumulate in f32; the result is rounded to out's type once.
// The copies stay allocated per thread, for the next product.
void run_widened(const TensorRef& a, bool ta, const TensorRef& b, bool tb, const TensorRef& out) {
  thread_local std::vector<float> a32, b32, c32;
  TensorRef c = dense_f32(out.shape, c32);
  run_blocked(widened(a, a32), ta, widened(b, b32), tb, c);
  visit_floating(out.dtype, [&](auto tag) { map<decltype(tag), float>(out, [](float x) { return x; }, {&c}); });
}

void matmul_kernel(const KernelArgs& args) {
  const TensorRef &a = args.in[0], &b = args.in[1], &out = args.out[0];
  const bool ta = args.attrs.b("transpose_a"), tb = args.attrs.b("transpose_b");
  KILN_CHECK(out.dtype == DType::f32 || out.dtype == DType::f64 || is_half(out.dtype),
             "matmul: no CPU kernel for dtype ", dtype_name(out.dtype));
  // oneDNN faults on an empty inner dim; the product is zeros (all-zero bits
  // in every float type).
  if ((ta ? a.shape[a.rank() - 2] : a.shape[a.rank() - 1]) == 0) {
    std::memset(out.data, 0, size_t(out.numel()) * itemsize(out.dtype));
    return;
  }
  if (out.dtype == DType::f64) {
    const int rank = out.rank();
    return run_loop(operand(a, ta, rank), operand(b, tb, rank), operand(out, false, rank));
  }
  if (out.dtype == DType::f32) return run_blocked(a, ta, b, tb, out);
  if (matmul_path(out.dtype) == MatmulPath::onednn && run_onednn(a, ta, b, tb, out)) return;
  run_widened(a, ta, b, tb, out);
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "matmul", {matmul_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
