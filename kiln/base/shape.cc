#include "kiln/base/shape.h"

#include <sstream>

#include "kiln/base/error.h"

namespace kiln {

void Dims::assign(const int64_t* first, size_t n) {
  KILN_CHECK(n <= size_t(kMaxRank), "rank ", n, " exceeds kiln's maximum rank of ", kMaxRank);
  rank_ = static_cast<int>(n);
  std::copy(first, first + n, d_.begin());
}

Dims Dims::filled(int rank, int64_t value) {
  KILN_CHECK(rank >= 0 && rank <= kMaxRank, "rank ", rank, " is outside 0..", kMaxRank);
  Dims d;
  d.rank_ = rank;
  std::fill(d.d_.begin(), d.d_.begin() + rank, value);
  return d;
}

void Dims::push_back(int64_t v) {
  KILN_CHECK(rank_ < kMaxRank, "rank would exceed kiln's maximum rank of ", kMaxRank);
  d_[rank_++] = v;
}

void Dims::insert(int pos, int64_t v) {
  KILN_CHECK(rank_ < kMaxRank, "rank would exceed kiln's maximum rank of ", kMaxRank);
  for (int i = rank_; i > pos; --i) d_[i] = d_[i - 1];
  d_[pos] = v;
  ++rank_;
}

void Dims::erase(int pos) {
  for (int i = pos; i + 1 < rank_; ++i) d_[i] = d_[i + 1];
  --rank_;
}

int64_t Dims::numel() const {
  int64_t n = 1;
  for (int64_t v : *this) n *= v;
  return n;
}

std::string to_string(const Dims& d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Dims& d) {
  os << '[';
  for (int i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  return os << ']';
}

Strides contiguous_strides(const Shape& shape) {
  Strides s = Dims::filled(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return s;
}

bool is_contiguous(const Shape& shape, const Strides& strides) {
  int64_t expect = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

int normalize_axis(int64_t axis, int rank, const char* what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  KILN_CHECK(a >= 0 && a < std::max(rank, 1) && (rank > 0 || a == 0), what, ": axis ", axis,
             " is out of range for a tensor of rank ", rank, " (valid: ", -rank, "..", rank - 1, ")");
  return static_cast<int>(a);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what) {
  int r = std::max(a.size(), b.size());
  Shape out = Dims::filled(r, 1);
  for (int i = 0; i < r; ++i) {
    int ia = a.size() - r + i, ib = b.size() - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    KILN_CHECK(da == db || da == 1 || db == 1, what, ": shapes ", a, " and ", b,
               " do not broadcast (dimension ", i, ": ", da, " vs ", db,
               "); reshape or expand one operand so trailing dimensions match or are 1");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln
