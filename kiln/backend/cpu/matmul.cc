// The matmul kernel: oneDNN's matmul primitive, with transposes passed as
// swapped strides and batch broadcasting as size-1 dims (no copies). Dtypes
// oneDNN cannot multiply here (f64 always, f16 without AVX512-FP16) run a
// plain loop, which is what gradient checks use.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/onednn.h"
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

// A primitive ready to run, or none where oneDNN has no implementation.
struct Prepared {
  std::optional<dnnl::matmul> primitive;
  dnnl::memory::desc a, b, c;
};

// Creating a primitive costs far more than a small product, so each layout
// is prepared once. oneDNN sizes its work split by the thread count at
// creation, which is therefore part of the key.
Prepared prepare(DType dtype, const Operand& a, const Operand& b, const Operand& c, int threads) {
  // Never destroyed (see onednn_engine).
  static auto* mu = new std::mutex;
  static auto* cache = new std::map<std::vector<int64_t>, Prepared>;
  std::vector<int64_t> key{int64_t(dtype), threads};
  for (const Operand* o : {&a, &b, &c}) {
    key.insert(key.end(), o->shape.begin(), o->shape.end());
    key.insert(key.end(), o->strides.begin(), o->strides.end());
  }
  std::lock_guard lock(*mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  Prepared p;
  if (auto type = onednn_type(dtype)) {
    p.a = dnnl::memory::desc(a.shape, *type, a.strides);
    p.b = dnnl::memory::desc(b.shape, *type, b.strides);
    p.c = dnnl::memory::desc(c.shape, *type, c.strides);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), onednn_engine());
      p.primitive = dnnl::matmul(pd);
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented)
        fail("matmul: oneDNN could not set up ", dtype_name(dtype), " product of ", Dims(a.shape),
             " and ", Dims(b.shape), ": ", e.what());
    }
  }
  if (cache->size() >= 4096) cache->clear();  // bounds memory when shapes keep changing
  cache->emplace(std::move(key), p);
  return p;
}

void run_onednn(const Prepared& p, const Operand& a, const Operand& b, const Operand& c) {
  dnnl::engine& engine = onednn_engine();
  dnnl::stream& stream = onednn_stream();
  dnnl::memory am(p.a, engine, a.data), bm(p.b, engine, b.data), cm(p.c, engine, c.data);
  p.primitive->execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

// The loop for dtypes oneDNN lacks. Each output row is accumulated in
// column blocks, over k in order, in the compute type (f32 for f16), so
// results do not depend on the thread count.
template <class T>
void run_loop(const Operand& a, const Operand& b, const Operand& c) {
  using C = compute_t<T>;
  constexpr int64_t kBlock = 256;
  constexpr int64_t s = sizeof(T);
  const int r = int(c.shape.size());
  const int64_t m = c.shape[r - 2], n = c.shape[r - 1], k = a.shape[r - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= c.shape[d];
  parallel_for(batches * m, n * k, [&](int64_t begin, int64_t end) {
    C acc[kBlock];
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
        std::fill(acc, acc + jn, C(0));
        for (int64_t p = 0; p < k; ++p) {
          C av = load<T>(arow + p * a.strides[r - 1] * s);
          const char* brow = b.data + (bo + p * b.strides[r - 2] + j0 * b.strides[r - 1]) * s;
          for (int64_t j = 0; j < jn; ++j) acc[j] += av * load<T>(brow + j * b.strides[r - 1] * s);
        }
        for (int64_t j = 0; j < jn; ++j) store<T>(crow + (j0 + j) * c.strides[r - 1] * s, acc[j]);
      }
    }
  });
}

void matmul_kernel(const KernelArgs& args) {
  const TensorRef& out = args.out[0];
  const int rank = out.rank();
  Operand a = operand(args.in[0], args.attrs.b("transpose_a"), rank);
  Operand b = operand(args.in[1], args.attrs.b("transpose_b"), rank);
  Operand c = operand(out, false, rank);
  int threads = use_threads();
  // oneDNN faults on an empty inner dim; the loop writes the zeros.
  if (a.shape[rank - 1] > 0) {
    Prepared p = prepare(out.dtype, a, b, c, threads);
    if (p.primitive) {
      run_onednn(p, a, b, c);
      return;
    }
  }
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
      run_loop<T>(a, b, c);
    else
      fail("matmul: no CPU kernel for dtype ", dtype_name(out.dtype));
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "matmul", {matmul_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
