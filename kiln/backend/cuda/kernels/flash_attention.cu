// Flash attention on CUDA, registered for the ops flash_attention and
// flash_attention_backward: the tensor-core kernels (flash_attention_tc.cuh)
// for bf16/f16 with head dims that are multiples of 16 and tiles that fit
// the device's shared memory, otherwise the scalar ones
// (flash_attention.cuh) with the largest query tile that fits.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <utility>

#include "kiln/backend/cuda/kernels/flash_attention.cuh"
#include "kiln/backend/cuda/kernels/flash_attention_tc.cuh"

namespace kiln::cuda {
namespace {

using namespace flash;

Dims dims_of(const KernelArgs& a, const char* op) {
  const Shape &q = a.in[0].shape, &k = a.in[1].shape, &v = a.in[2].shape;
  Dims d{q[0], q[1], k[1], q[2], k[2], q[3], v[3], k[2] - q[2], a.attrs.b("causal"),
         a.attrs.i("sliding_window")};
  KILN_CHECK(d.head_dim <= kMaxHeadDim && d.v_dim <= kMaxHeadDim, op, " (CUDA): head_dim ",
             d.head_dim, " and v_dim ", d.v_dim, " must be at most ", kMaxHeadDim);
  return d;
}

DocIds doc_ids(const KernelArgs& a, size_t index) {
  if (a.in.size() <= index) return {};
  const DType t = a.in[index].dtype;
  KILN_CHECK(t == DType::i32 || t == DType::i64, a.op.name, " (CUDA): doc_ids must be i32 or i64, got ",
             dtype_name(t));
  return {a.in[index].data, t == DType::i64};
}

// The shared memory the device allows one block.
size_t shared_memory_limit() {
  int limit = 0;
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                         current_device()));
  return size_t(limit);
}

// The tensor-core kernels' shared memory: forward, backward's dK/dV kernel
// and its dQ kernel; all zero when they do not apply to T or these dims.
template <class T>
std::array<size_t, 3> tensor_core_bytes(const Dims& d) {
  if constexpr (!std::is_same_v<T, bf16> && !std::is_same_v<T, f16>) {
    return {0, 0, 0};
  } else {
    if (d.head_dim % 16 || d.v_dim % 16 || d.head_dim == 0 || d.v_dim == 0) return {0, 0, 0};
    TcTiles<T> t;
    return {TcTiles<T>::carve(t, nullptr, d.head_dim, d.v_dim, false, d.v_dim, 0),
            TcTiles<T>::carve(t, nullptr, d.head_dim, d.v_dim, true, d.head_dim, d.v_dim),
            TcTiles<T>::carve(t, nullptr, d.head_dim, d.v_dim, true, d.head_dim, 0)};
  }
}

// The largest query tile (64, 32 or 16 rows) of the scalar kernels whose
// shared memory the device allows one block, and its bytes.
template <class C>
std::pair<int, size_t> query_tile(const Dims& d, bool backward, const char* op) {
  const size_t limit = shared_memory_limit();
  Tiles<C> t;
  for (int rows : {64, 32, 16}) {
    size_t bytes = Tiles<C>::carve(t, nullptr, rows, d.head_dim, d.v_dim, backward);
    if (bytes <= size_t(limit)) return {rows, bytes};
  }
  fail(op, " (CUDA): head_dim ", d.head_dim, " and v_dim ", d.v_dim, " need ",
            Tiles<C>::carve(t, nullptr, 16, d.head_dim, d.v_dim, backward),
            " bytes of shared memory per block; this GPU allows ", limit);
}

// Launches kernel<Rows> over `blocks` blocks with `bytes` of shared memory.
template <class K, class... A>
void launch_tiles(K kernel, long long blocks, size_t bytes, A... args) {
  if (blocks <= 0) return;
  KILN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  kernel<<<unsigned(blocks), kThreads, bytes, current_stream()>>>(args...);
  KILN_CUDA_CHECK_LAUNCH();
}

// Calls f(std::integral_constant<int, rows>) for rows 64, 32 or 16.
template <class F>
void with_rows(int rows, F&& f) {
  if (rows == 64) f(std::integral_constant<int, 64>{});
  else if (rows == 32) f(std::integral_constant<int, 32>{});
  else f(std::integral_constant<int, 16>{});
}

void flash_forward(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "flash_attention", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const Dims d = dims_of(a, "flash_attention");
    if constexpr (std::is_same_v<C, float> && !std::is_same_v<T, float>) {
      const size_t tc = tensor_core_bytes<T>(d)[0];
      if (tc && tc <= shared_memory_limit()) {
        const float scale = float(a.attrs.f("scale"));
        launch_tiles(flash_forward_tc_k<T>, d.batch * d.q_heads * ((d.q_len + kTcTile - 1) / kTcTile),
                     tc, a.in[0].ptr<const T>(), a.in[1].ptr<const T>(), a.in[2].ptr<const T>(),
                     doc_ids(a, 3), a.out[0].ptr<T>(), a.out[1].ptr<float>(), d, scale);
        return;
      }
    }
    auto [rows, bytes] = query_tile<C>(d, false, "flash_attention");
    with_rows(rows, [&](auto r) {
      constexpr int R = decltype(r)::value;
      launch_tiles(flash_forward_k<T, R>, d.batch * d.q_heads * ((d.q_len + R - 1) / R), bytes,
                   a.in[0].ptr<const T>(), a.in[1].ptr<const T>(), a.in[2].ptr<const T>(),
                   doc_ids(a, 3), a.out[0].ptr<T>(), a.out[1].ptr<C>(), d,
                   C(a.attrs.f("scale")));
    });
  });
}

void flash_backward(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "flash_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const Dims d = dims_of(a, "flash_attention_backward");
    const BackwardArgs args{a.in[0].data, a.in[1].data, a.in[2].data, a.in[3].data,
                            a.in[4].data, a.in[5].data, doc_ids(a, 6),
                            a.out[0].data, a.out[1].data, a.out[2].data};
    if constexpr (std::is_same_v<C, float> && !std::is_same_v<T, float>) {
      const std::array<size_t, 3> tc = tensor_core_bytes<T>(d);
      if (tc[1] && std::max(tc[1], tc[2]) <= shared_memory_limit()) {
        const float scale = float(a.attrs.f("scale"));
        launch_tiles(flash_backward_kv_tc_k<T>,
                     d.batch * d.kv_heads * ((d.kv_len + kTcTile - 1) / kTcTile), tc[1], args, d,
                     scale);
        launch_tiles(flash_backward_q_tc_k<T>,
                     d.batch * d.q_heads * ((d.q_len + kTcTile - 1) / kTcTile), tc[2], args, d,
                     scale);
        return;
      }
    }
    auto [rows, bytes] = query_tile<C>(d, true, "flash_attention_backward");
    with_rows(rows, [&](auto r) {
      constexpr int R = decltype(r)::value;
      const C scale = C(a.attrs.f("scale"));
      launch_tiles(flash_backward_kv_k<T, R>,
                   d.batch * d.kv_heads * ((d.kv_len + kTileK - 1) / kTileK), bytes, args, d,
                   scale);
      launch_tiles(flash_backward_q_k<T, R>, d.batch * d.q_heads * ((d.q_len + R - 1) / R),
                   bytes, args, d, scale);
    });
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "flash_attention", {flash_forward, false}},
    {DeviceKind::cuda, "flash_attention_backward", {flash_backward, false}},
};

}  // namespace
}  // namespace kiln::cuda
