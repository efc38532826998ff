// Kernels of the random ops. Element i is a function of philox_block(seed,
// offset + i) alone, so the result is independent of the thread split.
// Samples are computed in double and rounded to the output dtype.
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/backend/cpu/loops.h"
#include "kiln/base/philox.h"

namespace kiln::cpu {
namespace {

// out[i] = sample(philox_block(seed, offset + i)).
template <class T, class F>
void fill(const KernelArgs& a, F sample) {
  const uint64_t seed = uint64_t(a.attrs.i("seed")), offset = uint64_t(a.attrs.i("offset"));
  char* out = static_cast<char*>(a.out[0].data);
  // A Philox block (ten rounds) costs some 8 elementwise operations.
  parallel_for(a.out[0].numel(), 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      store<T>(out + i * sizeof(T), sample(philox_block(seed, offset + uint64_t(i))));
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
    fill<T>(a, [=](const PhiloxBlock& r) {
      // Box-Muller, cosine branch; 1 - u keeps the logarithm's argument in (0, 1].
      double radius = std::sqrt(-2 * std::log(1 - unit_double(r[0], r[1])));
      double angle = 2 * std::numbers::pi * unit_double(r[2], r[3]);
      return mean + stddev * radius * std::cos(angle);
    });
  });
}

void bernoulli_kernel(const KernelArgs& a) {
  const double p = a.attrs.f("p");
  visit_dtype(a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fill<T>(a, [=](const PhiloxBlock& r) { return int(double(r[0]) * 0x1.0p-32 < p); });
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "random_uniform", {uniform_kernel, false}},
    {DeviceKind::cpu, "random_normal", {normal_kernel, false}},
    {DeviceKind::cpu, "bernoulli", {bernoulli_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
