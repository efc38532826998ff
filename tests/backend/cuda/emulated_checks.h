// What the tests of kiln's CUDA kernels run on the CPU share (include after
// emulated.h and the kernel headers): host copies of tensors, the check
// that a result is the CPU's bits, and launch_n's launch.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime/tensor.h"
#include "tests/support/spread_values.h"

namespace kiln::test {

// A tensor's elements on the host, as T (the storage type: bf16, f16, ...).
template <class T>
std::vector<T> host(const Tensor& t) {
  const std::vector<uint8_t> bytes = element_bytes(t);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// `got` holds the bits of the CPU's result `cpu`.
template <class T>
void expect_cpu_bits(const std::vector<T>& got, const Tensor& cpu, const std::string& what) {
  ASSERT_EQ(got.size(), size_t(cpu.shape().numel())) << what;
  EXPECT_EQ(element_bytes(from_host(got.data(), cpu.dtype(), cpu.shape())), element_bytes(cpu))
      << what << ": not the CPU's bits";
}

// A grid-stride kernel over n elements (common.cuh's launch_n), on two
// blocks of kBlock threads, so that the loops go round more than once.
template <class... P, class... A>
void launch_n(void (*kernel)(P...), long long n, A... args) {
  cuda::emulated::launch(dim3(2), cuda::kBlock, 0, kernel, args..., n);
}

}  // namespace kiln::test
