// The kernels of the random ops (launched by random.cu): element i is a
// function of philox_block(seed, offset + i) alone (kiln/base/philox.h),
// computed in double and rounded to the output dtype, as the CPU's kernels
// do. Uniform and bernoulli draws are exact arithmetic, and normal draws run
// the CPU's own Box-Muller code (kiln/base/box_muller.h: IEEE-exact
// operations only, and CUDA code is built with --fmad=false), so all equal
// the CPU's bit for bit.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/base/box_muller.h"
#include "kiln/base/philox.h"

namespace kiln::cuda::rng {

struct Stream {
  unsigned long long seed, offset;
  __device__ PhiloxBlock at(long long i) const { return philox_block(seed, offset + i); }
};

// The largest value of T below v (v finite), as the CPU's next_below.
template <class T>
__device__ T next_below(T v) {
  if constexpr (std::is_same_v<T, float>) return nextafterf(v, -INFINITY);
  else if constexpr (std::is_same_v<T, double>) return nextafter(v, -(double)INFINITY);
  else {  // bf16, f16: sign-magnitude bits
    uint16_t b = v.bits;
    if ((b & 0x7fff) == 0) b = 0x8001;  // below +-0: the smallest negative
    else if (b & 0x8000) b = uint16_t(b + 1);
    else b = uint16_t(b - 1);
    v.bits = b;
    return v;
  }
}

template <class T>
__global__ void uniform_k(T* out, Stream s, double low, double high, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step()) {
    const PhiloxBlock r = s.at(i);
    // Rounding to T can reach `high`; step back below it to keep [low, high).
    const T v = narrow<T>(low + (high - low) * unit_double(r[0], r[1]));
    out[i] = double(widen(v)) < high ? v : next_below(v);
  }
}

template <class T>
__global__ void normal_k(T* out, Stream s, double mean, double stddev, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step()) {
    out[i] = narrow<T>(box_muller::normal(s.at(i), mean, stddev));
  }
}

template <class T>
__global__ void bernoulli_k(T* out, Stream s, double p, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step())
    out[i] = narrow<T>(int(double(s.at(i)[0]) * 0x1.0p-32 < p));
}

}  // namespace kiln::cuda::rng
