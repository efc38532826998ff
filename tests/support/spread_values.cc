#include "tests/support/spread_values.h"

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>

namespace kiln::test {

Tensor spread_tensor(DType t, const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 3 ? 0.5 : u(rng);
  if (t == DType::b8) {
    std::vector<bool> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = v[i] > 0;
    return from_vector<bool>(b, s, kCPU);
  }
  if (t == DType::i32 || t == DType::i64) {
    std::vector<int64_t> n(v.size());
    for (size_t i = 0; i < v.size(); ++i) n[i] = int64_t(std::lround(v[i] * 10));
    return from_vector<int64_t>(n, s).to(t);
  }
  return from_vector<double>(v, s).to(t);
}

std::vector<uint8_t> element_bytes(const Tensor& t) {
  std::vector<uint8_t> out;
  if (t.dtype() == DType::b8) {
    for (bool b : t.to_vector<bool>()) out.push_back(b);
    return out;
  }
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      std::vector<T> v = t.to_vector<T>();
      out.resize(v.size() * sizeof(T));
      if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
    }
  });
  return out;
}

}  // namespace kiln::test
