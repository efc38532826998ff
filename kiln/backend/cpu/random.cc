// Kernels of the random ops. Element i is a function of philox_block(seed,
// offset + i) alone, so the result is independent of the thread split.
// Samples are computed in double and rounded to the output dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/base/box_muller.h"
#include "kiln/base/philox.h"

namespace kiln::cpu {
namespace {

// The blocks of kLanes consecutive counters, word by word: computed lane by
// lane in a loop of their own, the ten rounds run in vector registers.
constexpr int kLanes = 32;
struct PhiloxLanes {
  alignas(64) uint32_t w[4][kLanes];
};

void philox_lanes(uint64_t seed, uint64_t counter, PhiloxLanes& r) {
  for (int l = 0; l < kLanes; ++l) {
    const PhiloxBlock b = philox_block(seed, counter + uint64_t(l));
    for (int k = 0; k < 4; ++k) r.w[k][l] = b[k];
  }
}

// out[i] = sample(philox_block(seed, offset + i)).
template <class T, class F>
void fill(const KernelArgs& a, F sample) {
  const uint64_t seed = uint64_t(a.attrs.i("seed")), offset = uint64_t(a.attrs.i("offset"));
  T* out = static_cast<T*>(a.out[0].data);
  // A Philox block (ten rounds) costs some 8 elementwise operations.
  parallel_for(a.out[0].numel(), 8, [&](int64_t begin, int64_t end) {
    // Local copies: the stores (through char*) could alias the captured
    // pointer and sampler, which would then be reloaded each element and
    // keep the loop scalar.
    const F f = sample;
    T* const o = out;
    PhiloxLanes r;
    for (int64_t i = begin; i < end; i += kLanes) {
      philox_lanes(seed, offset + uint64_t(i), r);
      const int n = int(std::min<int64_t>(kLanes, end - i));
      // No 'omp simd' here: it would keep each lane's block in memory
      // (gathers); the compiler vectorises the loop as it is.
      for (int l = 0; l < n; ++l)
        store<T>(reinterpret_cast<char*>(o + i + l),
                 f(PhiloxBlock{{r.w[0][l], r.w[1][l], r.w[2][l], r.w[3][l]}}));
    }
  });
}

// Calls f(T{}) for floating dtypes only (the ops' shape rules ensure it).
template <class F>
void visit_floating(DType t, F&& f) {
  visit_dtype(t, [&](auto tag) {
    if constexpr (std::is_floating_point_v<compute_t<decltype(tag)>>) f(tag);
  });
}

// The largest value of T below v (v finite).
template <class T>
T next_below(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(v, -std::numeric_limits<T>::infinity());
  } else {  // bf16, f16: sign-magnitude bits
    T r = v;
    if ((v.bits & 0x7fff) == 0) r.bits = 0x8001;  // below +-0: the smallest negative
    else if (v.bits & 0x8000) r.bits = uint16_t(v.bits + 1);
    else r.bits = uint16_t(v.bits - 1);
    return r;
  }
}

// x rounded to T, and back.
template <class T>
T rounded(double x) {
  T v;
  store<T>(reinterpret_cast<char*>(&v), x);
  return v;
}
template <class T>
double widened(T v) {
  return double(load<T>(reinterpret_cast<const char*>(&v)));
}

void uniform_kernel(const KernelArgs& a) {
  const double low = a.attrs.f("low"), high = a.attrs.f("high");
  visit_floating(a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fill<T>(a, [=](const PhiloxBlock& r) {
      // Rounding to T can reach `high`; step back below it to keep [low, high).
      T v = rounded<T>(low + (high - low) * unit_double(r[0], r[1]));
      return widened(v) < high ? v : next_below(v);
    });
  });
}

void normal_kernel(const KernelArgs& a) {
  const double mean = a.attrs.f("mean"), stddev = a.attrs.f("std");
  visit_floating(a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fill<T>(a, [=](const PhiloxBlock& r) { return box_muller::normal(r, mean, stddev); });
  });
}

void bernoulli_kernel(const KernelArgs& a) {
  const double p = a.attrs.f("p");
  visit_dtype(a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fill<T>(a, [=](const PhiloxBlock& r) { return int(double(r[0]) * 0x1.0p-32 < p); });
  });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "random_uniform", {uniform_kernel, false}},
    {DeviceKind::cpu, "random_normal", {normal_kernel, false}},
    {DeviceKind::cpu, "bernoulli", {bernoulli_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
