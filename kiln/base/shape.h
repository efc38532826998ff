// Shapes and strides: small fixed-capacity vectors (rank <= 8) so that
// passing them around never allocates.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace kiln {

inline constexpr int kMaxRank = 8;

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> d) { assign(d.begin(), d.size()); }
  explicit Dims(std::span<const int64_t> d) { assign(d.data(), d.size()); }
  explicit Dims(const std::vector<int64_t>& d) { assign(d.data(), d.size()); }
  static Dims filled(int rank, int64_t value);

  int size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t back() const { return d_[rank_ - 1]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + rank_; }
  int64_t* begin() { return d_.data(); }
  int64_t* end() { return d_.data() + rank_; }
  void push_back(int64_t v);
  void insert(int pos, int64_t v);
  void erase(int pos);
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  int64_t numel() const;  // product of the entries (1 for rank 0)

  friend bool operator==(const Dims& a, const Dims& b) {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void assign(const int64_t* first, size_t n);
  std::array<int64_t, kMaxRank> d_{};
  int rank_ = 0;
};

using Shape = Dims;
using Strides = Dims;

std::string to_string(const Dims& d);  // "[2,3,4]"
std::ostream& operator<<(std::ostream& os, const Dims& d);

// Row-major strides, in elements.
Strides contiguous_strides(const Shape& shape);
// True when `strides` lay `shape` out row-major and dense (size-1 dims ignored).
bool is_contiguous(const Shape& shape, const Strides& strides);

// Normalises a possibly negative axis against `rank`; throws naming `what`.
int normalize_axis(int64_t axis, int rank, const char* what);

// NumPy broadcasting of two shapes; throws naming `what` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what);

}  // namespace kiln
