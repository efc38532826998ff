// Runs kiln's CUDA kernels on the CPU, to check their indexing, masking and
// synchronisation where there is no GPU. Include this first, then a kernel
// header of kiln/backend/cuda/kernels (its device code compiles as host
// C++), or a generated kernel's source; launch() runs the grid block by
// block, each block's threads (x fastest, then y; warps of 32 of that order,
// as on the GPU) as std::threads meeting at real barriers for __syncthreads
// and, per warp, for the shuffles. Shared memory is a static array (KILN_BLOCK_SHARED)
// or the block's dynamic buffer. Tensor-core fragments (nvcuda::wmma, 16 x
// 16 x 16) hold their whole tile in every lane, in f32, and multiply it in
// order: the fragment API's meaning, not the hardware's layout or rounding.
// Not emulated: atomics beyond atomicCAS and atomicMin, warp-divergent
// shuffles (kiln's kernels shuffle with every lane).
#pragma once
#define KILN_CUDA_EMULATED 1
#define KILN_BLOCK_SHARED static
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <type_traits>
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

namespace kiln::cuda::emulated {

inline thread_local int thread_rank;  // within the block: x + y * blockDim.x
inline int lane() { return thread_rank % 32; }

struct Block {
  Block(int threads, size_t dynamic_bytes) : all(threads), dynamic(dynamic_bytes / 128 + 1) {
    for (int w = 0; w * 32 < threads; ++w) {
      warps.push_back(std::make_unique<std::barrier<>>(std::min(32, threads - 32 * w)));
      slots.emplace_back();
    }
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<std::array<uint64_t, 32>> slots;  // a warp's shuffle exchange
  std::atomic<int> any{0};                      // __syncthreads_or
  struct alignas(128) Chunk {
    unsigned char bytes[128];
  };
  std::vector<Chunk> dynamic;
};

inline thread_local Block* current = nullptr;

// A warp's exchange: each lane offers v and takes lane `from`'s.
template <class T>
T exchange(T v, int from) {
  static_assert(sizeof(T) <= 8);
  Block& b = *current;
  const int w = thread_rank / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  b.slots[size_t(w)][size_t(lane())] = bits;
  b.warps[size_t(w)]->arrive_and_wait();
  const uint64_t got = b.slots[size_t(w)][size_t(from)];
  b.warps[size_t(w)]->arrive_and_wait();  // every lane has read before the next offer
  T r;
  std::memcpy(&r, &got, sizeof r);
  return r;
}

// The threads blocks run on, made once and kept: run(n, body) runs body(t)
// for t = 0 .. n-1, each on a thread of its own, and returns when all have.
// (Threads made per block cost more than the kernels.) Never destroyed:
// its threads wait for work until the process ends, so a shared object
// holding it is never unloaded.
class Team {
 public:
  static Team& get() {
    static Team* team = new Team;
    return *team;
  }
  void run(int n, const std::function<void(int)>& body) {
    std::unique_lock lock(mu_);
    while (int(workers_) < n) std::thread([this, i = workers_++] { work(i); }).detach();
    body_ = &body;
    active_ = n;
    running_ = n;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [&] { return running_ == 0; });
  }

 private:
  void work(int i) {
    uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (i >= active_) continue;
      const std::function<void(int)>& body = *body_;
      lock.unlock();
      body(i);
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* body_ = nullptr;
  uint64_t generation_ = 0;
  int workers_ = 0, active_ = 0, running_ = 0;
};

// Runs kernel(args...) over `grid` blocks of `block_dim` threads with
// `dynamic_bytes` of dynamic shared memory, one block after another.
template <class... P, class... A>
void launch(dim3 grid, dim3 block_dim, size_t dynamic_bytes, void (*kernel)(P...), A... args) {
  const int threads = int(block_dim.x * block_dim.y * block_dim.z);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block block(threads, dynamic_bytes);
        Team::get().run(threads, [&](int t) {
          thread_rank = t;
          threadIdx = {unsigned(t) % block_dim.x, unsigned(t) / block_dim.x % block_dim.y,
                       unsigned(t) / (block_dim.x * block_dim.y)};
          blockIdx = {x, y, z};
          blockDim = block_dim;
          gridDim = grid;
          current = &block;
          kernel(args...);
          // A thread that has returned no longer holds the others up.
          block.warps[size_t(t / 32)]->arrive_and_drop();
          block.all.arrive_and_drop();
        });
      }
}

}  // namespace kiln::cuda::emulated

inline void __syncthreads() { kiln::cuda::emulated::current->all.arrive_and_wait(); }

inline int __syncthreads_or(int predicate) {
  kiln::cuda::emulated::Block& b = *kiln::cuda::emulated::current;
  b.all.arrive_and_wait();  // the previous call's readers are done
  if (predicate) b.any.store(1);
  b.all.arrive_and_wait();
  const int any = b.any.load();
  b.all.arrive_and_wait();
  if (threadIdx.x == 0) b.any.store(0);  // before thread 0 reaches the next call's first barrier
  return any;
}

template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  return kiln::cuda::emulated::exchange(v, kiln::cuda::emulated::lane() ^ lane_mask);
}

template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
  const int from = kiln::cuda::emulated::lane() + int(delta);
  return kiln::cuda::emulated::exchange(v, from < 32 ? from : kiln::cuda::emulated::lane());
}

template <class T>
T __shfl_sync(unsigned, T v, int src_lane) {
  return kiln::cuda::emulated::exchange(v, src_lane);
}

inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned value) {
  std::atomic_ref<unsigned>(*address).compare_exchange_strong(compare, value);
  return compare;  // the old value
}

inline unsigned long long atomicMin(unsigned long long* address, unsigned long long value) {
  std::atomic_ref<unsigned long long> a(*address);
  unsigned long long old = a.load();
  while (value < old && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

inline long long min(long long a, long long b) { return a < b ? a : b; }
// CUDA's math functions device code calls unqualified.
using std::isfinite;

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "emulated: 16 x 16 x 16 fragments only");
  float v[16][16];  // [row][column] of the fragment's matrix
};

template <class Use, class T, class Layout, class P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const P* p, unsigned ldm) {
  constexpr bool rows = std::is_same_v<Layout, row_major>;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) f.v[i][j] = float(rows ? p[i * ldm + j] : p[j * ldm + i]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) f.v[i][j] = layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  if (kiln::cuda::emulated::lane() != 0) return;  // every lane holds the tile: one writes it
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) (layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i]) = f.v[i][j];
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float value) {
  for (auto& row : f.v)
    for (float& x : row) x = value;
}

template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = c.v[i][j];
      for (int k = 0; k < 16; ++k) acc = std::fma(a.v[i][k], b.v[k][j], acc);
      out[i][j] = acc;
    }
  std::memcpy(d.v, out, sizeof out);
}

}  // namespace nvcuda::wmma

namespace kiln::cuda {
inline unsigned char* dynamic_shared() { return emulated::current->dynamic.data()->bytes; }
}  // namespace kiln::cuda
