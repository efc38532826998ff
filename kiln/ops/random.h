// Random tensors from a counter-based generator (Philox4x32-10, see
// kiln/base/philox.h). A random op has no inputs: its attributes (seed,
// offset, shape, dtype, distribution parameters) fix its values, and element
// i uses counter offset + i, so eager, debug and compiled runs, and every
// thread count, draw the same numbers.
//
//   kiln::Generator g(42);
//   Tensor x = kiln::randn({2, 3}, g);  // counters [0, 6); g.offset() is now 6
//   Tensor y = kiln::rand({4}, g);      // counters [6, 10)
//
// Each call advances the generator's offset by the number of elements it
// draws, so successive calls never share counters. Under a trace (compile,
// value_and_grad) the seed and offset are recorded as attributes when the
// function is traced: a compiled function replays the same draws on every
// call.
#pragma once
#include <cstdint>

#include "kiln/runtime/tensor.h"

namespace kiln {

// A seed and the next unused counter. Not thread-safe: use one per thread.
class Generator {
 public:
  explicit Generator(uint64_t seed, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  // Reserves `count` counters; returns the first.
  uint64_t advance(uint64_t count) {
    uint64_t first = offset_;
    offset_ += count;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t offset_;
};

// Uniform in [low, high) (floating dtypes).
Tensor uniform(const Shape& shape, double low, double high, Generator& g,
               DType dtype = DType::f32, Device device = kCPU);
Tensor rand(const Shape& shape, Generator& g, DType dtype = DType::f32, Device device = kCPU);
// Normal with mean and standard deviation stddev (floating dtypes; Box-Muller).
Tensor normal(const Shape& shape, double mean, double stddev, Generator& g,
              DType dtype = DType::f32, Device device = kCPU);
Tensor randn(const Shape& shape, Generator& g, DType dtype = DType::f32, Device device = kCPU);
// 1 with probability p, else 0.
Tensor bernoulli(const Shape& shape, double p, Generator& g, DType dtype = DType::b8,
                 Device device = kCPU);

// Inverted dropout: zeroes each element of floating `x` with probability p
// and scales the rest by 1 / (1 - p). The mask is drawn with (seed, offset)
// (x.numel() counters from offset); the gradient reuses the same mask.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
Tensor dropout(const Tensor& x, double p, Generator& g);

}  // namespace kiln
