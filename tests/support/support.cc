#include "tests/support/support.h"

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/ir/op.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"

namespace kiln::test {

::testing::AssertionResult all_close(const std::vector<double>& a, const std::vector<double>& b,
                                     double rtol, double atol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool same_nan = std::isnan(a[i]) && std::isnan(b[i]);
    bool same_inf = std::isinf(a[i]) && a[i] == b[i];
    double err = std::abs(a[i] - b[i]);
    if (same_nan || same_inf || err <= atol + rtol * std::abs(b[i])) continue;
    if (!bad++) first = i;
    worst = std::max(worst, err);
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ; first at "
                                       << first << ": " << a[first] << " vs " << b[first]
                                       << "; worst abs error " << worst << " (rtol " << rtol
                                       << ", atol " << atol << ")";
}

Tensor random_ids(int64_t B, int64_t S, int64_t vocab, uint64_t seed) {
  Generator g(seed);
  return (rand({B, S}, g) * double(vocab)).to(DType::i64);
}

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << ir::to_string(a.type()) << " vs "
                                         << ir::to_string(b.type());
  return all_close(a.to_vector<double>(), b.to_vector<double>(), rtol, atol);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace kiln::test
