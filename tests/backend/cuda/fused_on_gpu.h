// What the CUDA tests of the fused ops share: the op (through its kernel)
// run forward and backward on the CPU and on cuda:0 from the same inputs
// and cotangents, run twice on cuda:0, and its peak memory there.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "kiln/runtime/backend.h"
#include "tests/backend/cuda/against_cpu.h"
#include "tests/support/fused_checks.h"

namespace kiln::test {

// Every output and floating input's gradient on the GPU is within the CUDA
// tolerance table of the CPU's (in: on the CPU).
inline void expect_gpu_matches_cpu(const Runner& f, const std::vector<Tensor>& in) {
  std::vector<Tensor> cots = cotangents_for(f, in, 3);
  ValueAndGrad cpu = grads_of(f, in, cots);
  ValueAndGrad gpu = grads_of(f, on_device(in, kCuda0), on_device(cots, kCuda0));
  for (size_t j = 1; j < cpu.values.size(); ++j)
    EXPECT_TRUE(matches_cpu(gpu.values[j], cpu.values[j])) << "output " << j - 1;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_floating(in[i].dtype())) continue;
    EXPECT_TRUE(matches_cpu(gpu.grads[i], cpu.grads[i])) << "gradient of input " << i;
  }
}

// Two runs give the same bits: every output and floating input's gradient
// (in: on the GPU).
inline void expect_same_bits_twice(const Runner& f, const std::vector<Tensor>& in) {
  std::vector<Tensor> cots = cotangents_for(f, in, 9);
  ValueAndGrad first = grads_of(f, in, cots), second = grads_of(f, in, cots);
  for (size_t j = 1; j < first.values.size(); ++j)
    EXPECT_EQ(first.values[j].to_vector<double>(), second.values[j].to_vector<double>())
        << "output " << j - 1;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_floating(in[i].dtype())) continue;
    EXPECT_EQ(first.grads[i].to_vector<double>(), second.grads[i].to_vector<double>())
        << "gradient of input " << i;
  }
}

// The most cuda:0 memory a forward and backward of f holds at once, beyond
// what was allocated before it (in and cots: on the GPU).
inline int64_t grads_peak_bytes(const Runner& f, const std::vector<Tensor>& in,
                                const std::vector<Tensor>& cots) {
  synchronize(kCuda0);
  const int64_t base = memory_stats(kCuda0).allocated;
  reset_peak_memory(kCuda0);
  ValueAndGrad r = grads_of(f, in, cots);
  synchronize(kCuda0);
  return memory_stats(kCuda0).peak_allocated - base;
}

}  // namespace kiln::test
