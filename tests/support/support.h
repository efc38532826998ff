// Helpers shared by kiln's tests.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::test {

// Element-wise |a - b| <= atol + rtol * |b|, with a readable failure.
::testing::AssertionResult all_close(const std::vector<double>& a, const std::vector<double>& b,
                                     double rtol, double atol);
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol);

// Token ids [B, S] (i64) drawn uniformly from [0, vocab) by Generator(seed).
Tensor random_ids(int64_t B, int64_t S, int64_t vocab, uint64_t seed);

// Runs `f`, which must throw kiln::Error with `part` in its message.
void expect_error(const std::function<void()>& f, const std::string& part);

// Runs `f` and returns the message of the kiln::Error it throws, "" if none.
std::string error_of(const std::function<void()>& f);

}  // namespace kiln::test
