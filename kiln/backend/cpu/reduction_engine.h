// The reduction engine of CPU kernels: folds a strided input over a set of
// axes with a caller-given operation (fold.h), one result per kept position.
//
// Every result is computed in the ONE canonical order of fold.h, whatever
// the layout of the input, the loop strategy or the thread count. Lanes make
// contiguous inner loops vectorise; chunks let a long reduction with few
// results run in parallel. Sums are therefore the same bits eagerly (over
// views), in graphs (over copies) and in fused kernels.
#pragma once
#include <algorithm>
#include <array>
#include <vector>

#include "kiln/backend/cpu/fold.h"
#include "kiln/backend/cpu/scalar.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/base/dtype.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cpu {

// The input split into kept axes (one result per position, row-major, as
// the contiguous output) and reduced axes. Size-1 axes are dropped and
// neighbours within each group merged where the strides allow, which keeps
// both orders unchanged. Strides are in elements.
struct ReducePlan {
  Shape kept, reduced;
  Strides kept_strides, reduced_strides;
  int64_t outputs() const { return kept.numel(); }
  int64_t length() const { return reduced.numel(); }
};

ReducePlan make_plan(const TensorRef& in, const std::vector<bool>& reduced);

// Offset (in elements) of position `index` of a row-major index space.
inline int64_t offset_of(int64_t index, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (int d = shape.size() - 1; d >= 0 && index > 0; --d) {
    off += (index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return off;
}

// Steps through a row-major index space, tracking the element offset.
class Cursor {
 public:
  Cursor(const Shape& shape, const Strides& strides, int64_t start)
      : shape_(shape), strides_(strides), offset_(offset_of(start, shape, strides)) {
    idx_ = Dims::filled(shape.size(), 0);
    for (int d = shape.size() - 1; d >= 0 && start > 0; --d) {
      idx_[d] = start % shape[d];
      start /= shape[d];
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (int d = shape_.size() - 1; d >= 0; --d) {
      offset_ += strides_[d];
      if (++idx_[d] < shape_[d]) return;
      offset_ -= strides_[d] * shape_[d];
      idx_[d] = 0;
    }
  }

 private:
  const Shape& shape_;
  const Strides& strides_;
  Dims idx_;
  int64_t offset_;
};

// Op as in fold.h; load may depend on the output (e.g. subtract its maximum).
template <class T, class Acc, class Op>
class Reducer {
 public:
  Reducer(const ReducePlan& p, const T* in, const Op& op) : p_(p), in_(in), op_(op) {}

  // One result per output position.
  std::vector<Acc> run() const {
    const int64_t outputs = p_.outputs(), length = p_.length();
    const int64_t chunks = std::max<int64_t>(1, (length + kChunk - 1) / kChunk);
    std::vector<Acc> result(size_t(outputs), op_.identity);
    // Partial results per (output, chunk), folded below in chunk order.
    std::vector<Acc> partial;
    Acc* dst = result.data();
    if (chunks > 1) {
      partial.assign(size_t(outputs * chunks), op_.identity);
      dst = partial.data();
    }
    const int64_t per_chunk = std::min(length, kChunk);
    if (columnar()) {
      const int64_t n0 = p_.kept.back(), blocks = (n0 + kBlock - 1) / kBlock;
      const int64_t items = outputs / n0 * blocks * chunks;
      parallel_for(items, per_chunk * kBlock, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int64_t c = i % chunks, blk = i / chunks % blocks, row = i / chunks / blocks;
          int64_t o0 = row * n0 + blk * kBlock;
          column_block(o0, std::min(kBlock, n0 - blk * kBlock), c, dst, chunks);
        }
      });
    } else {
      parallel_for(outputs * chunks, per_chunk, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = row_chunk(i / chunks, i % chunks);
      });
    }
    if (chunks > 1) {
      parallel_for(outputs, chunks, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          result[o] = combine_chunks(op_, partial.data() + o * chunks, chunks);
      });
    }
    return result;
  }

 private:
  // Outputs per columnar block: kLanes rows of accumulators fill 32 KiB (L1).
  static constexpr int64_t kBlock = 32768 / (kLanes * sizeof(Acc));

  // Reduced axes outside a contiguous kept inner axis: fold whole rows of
  // neighbouring outputs at once (vectorised across outputs).
  bool columnar() const {
    return !p_.kept.empty() && p_.kept_strides.back() == 1 && p_.kept.back() >= 8 &&
           !p_.reduced.empty() && p_.reduced_strides.back() != 1;
  }

  std::pair<int64_t, int64_t> chunk_range(int64_t c) const {
    return {c * kChunk, std::min(p_.length(), (c + 1) * kChunk)};
  }

  // Folds chunk c of output o.
  Acc row_chunk(int64_t o, int64_t c) const {
    std::array<Acc, kLanes> lanes;
    lanes.fill(op_.identity);
    auto [r, end] = chunk_range(c);
    const T* base = in_ + offset_of(o, p_.kept, p_.kept_strides);
    const int rr = p_.reduced.size();
    const int64_t m0 = rr ? p_.reduced.back() : 1, s0 = rr ? p_.reduced_strides.back() : 0;
    while (r < end) {
      // A run along the innermost reduced axis.
      int64_t col = r % m0, n = std::min(m0 - col, end - r);
      const T* p = base + offset_of(r - col, p_.reduced, p_.reduced_strides) + col * s0;
      // Separate loads for a contiguous run so that the compiler vectorises it.
      if (s0 == 1)
        fold_run(op_, lanes.data(), n, int(r % kLanes), [&](int64_t i) { return op_.load(p[i], o); });
      else
        fold_run(op_, lanes.data(), n, int(r % kLanes),
                 [&](int64_t i) { return op_.load(p[i * s0], o); });
      r += n;
    }
    fold_lanes(op_, lanes.data());
    return lanes[0];
  }

  // Folds chunk c of outputs [o0, o0 + nb), which are neighbours along the
  // contiguous kept inner axis; writes dst[o * chunks + c].
  void column_block(int64_t o0, int64_t nb, int64_t c, Acc* dst, int64_t chunks) const {
    std::array<Acc, kLanes * kBlock> lanes;  // lane j of output o0 + b at j * kBlock + b
    lanes.fill(op_.identity);
    const T* base = in_ + offset_of(o0, p_.kept, p_.kept_strides);
    auto [r0, end] = chunk_range(c);
    Cursor cursor(p_.reduced, p_.reduced_strides, r0);
    for (int64_t r = r0; r < end; ++r, cursor.next()) {
      const T* p = base + cursor.offset();
      Acc* l = lanes.data() + r % kLanes * kBlock;
      for (int64_t b = 0; b < nb; ++b) l[b] = op_.combine(l[b], op_.load(p[b], o0 + b));
    }
    fold_lane_columns(op_, lanes.data(), kBlock, nb);
    for (int64_t b = 0; b < nb; ++b) dst[(o0 + b) * chunks + c] = lanes[size_t(b)];
  }

  const ReducePlan& p_;
  const T* in_;
  const Op& op_;
};

// out[o] = finish(o), stored as the output's dtype.
template <class F>
void write_results(const TensorRef& out, F finish) {
  visit_dtype(out.dtype, [&](auto tag) {
    using O = decltype(tag);
    O* p = out.ptr<O>();
    parallel_for(out.numel(), 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) p[o] = narrow<O>(finish(o));
    });
  });
}

template <class T, class Acc, class Op>
std::vector<Acc> reduce(const ReducePlan& plan, const TensorRef& in, const Op& op) {
  return Reducer<T, Acc, Op>(plan, in.ptr<T>(), op).run();
}

}  // namespace kiln::cpu
