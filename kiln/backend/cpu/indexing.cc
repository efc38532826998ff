// Kernels of the indexing ops. Indices are converted to i64 and checked in
// one serial pass before any work starts (an exception must not leave an
// OpenMP region). Accumulating kernels split work only across positions
// that write disjoint outputs, and add each output's contributions in index
// order, so results are the same for every thread count.
#include <cstring>
#include <vector>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/base/error.h"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cpu {
namespace {

// The indices of `index` (i32 or i64, as the shape rules ensure) in
// row-major order, each checked against [0, size); `what` names the indexed
// range in the error.
std::vector<int64_t> checked_indices(const KernelArgs& a, const TensorRef& index, int64_t size,
                                     const std::string& what) {
  std::vector<int64_t> out(size_t(index.numel()));
  auto widen = [&](const auto* p) {
    for (size_t k = 0; k < out.size(); ++k) out[k] = int64_t(p[k]);
  };
  if (index.dtype == DType::i32) widen(index.ptr<int32_t>());
  else widen(index.ptr<int64_t>());
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] >= 0 && out[k] < size) continue;
    fail(a.op.name, ": index ", out[k], " is out of range for ", what,
         size > 0 ? cat(" (valid: 0..", size - 1, ")") : std::string(" (it has no entries)"),
         "; it is at flat position ", k, " of the index tensor ", index.shape);
  }
  return out;
}

std::string axis_range(int axis, int64_t size) { return cat("axis ", axis, " of size ", size); }

// Copies one element; the constant sizes let the compiler inline the copy.
void copy_element(char* dst, const char* src, size_t size) {
  switch (size) {
    case 1: *dst = *src; return;
    case 2: std::memcpy(dst, src, 2); return;
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    default: std::memcpy(dst, src, size);
  }
}

// Visits the lines of `shape` along `axis`: every position with the axis
// coordinate 0. Calls f(offsets) with offsets[k] = the position's offset
// under strides[k] (in elements), in parallel over lines.
template <size_t N, class F>
void for_each_line(const Shape& shape, int axis, const std::array<Strides, N>& strides, F&& f) {
  Shape rest;
  std::array<Strides, N> rs;
  for (int d = 0; d < shape.size(); ++d) {
    if (d == axis) continue;
    rest.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) rs[k].push_back(strides[k][d]);
  }
  const int r = rest.size();
  parallel_for(rest.numel(), shape[axis], [&](int64_t begin, int64_t end) {
    Dims coord = Dims::filled(r, 0);
    std::array<int64_t, N> off{};
    int64_t rem = begin;
    for (int d = r - 1; d >= 0; --d) {
      coord[d] = rem % rest[d];
      rem /= rest[d];
      for (size_t k = 0; k < N; ++k) off[k] += coord[d] * rs[k][d];
    }
    for (int64_t line = begin; line < end; ++line) {
      f(off);
      for (int d = r - 1; d >= 0; --d) {  // step to the next position
        for (size_t k = 0; k < N; ++k) off[k] += rs[k][d];
        if (++coord[d] < rest[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= rs[k][d] * rest[d];
        coord[d] = 0;
      }
    }
  });
}

// dst[c] += src[c] for c in [0, n), elements of type T.
template <class T>
void add_into(char* dst, const char* src, int64_t n) {
  for (int64_t c = 0; c < n; ++c)
    store<T>(dst + c * sizeof(T), load<T>(dst + c * sizeof(T)) + load<T>(src + c * sizeof(T)));
}

void copy_input(const TensorRef& out, const TensorRef& in) {
  std::memcpy(out.data, in.data, size_t(in.numel()) * itemsize(in.dtype));
}

// out[.., i, ..] = x[.., index[.., i, ..], ..] (positions of index).
void gather_kernel(const KernelArgs& a) {
  const TensorRef &x = a.in[0], &index = a.in[1], &out = a.out[0];
  int axis = normalize_axis(a.attrs.i("axis"), x.rank(), "gather");
  const int64_t size = x.shape[axis];
  std::vector<int64_t> idx = checked_indices(a, index, size, axis_range(axis, size));
  const size_t bytes = itemsize(x.dtype);
  const char* xp = static_cast<const char*>(x.data);
  char* op = static_cast<char*>(out.data);
  const Strides is = contiguous_strides(index.shape);
  const int64_t n = index.shape[axis], step = is[axis], xstep = x.strides[axis];
  for_each_line<2>(index.shape, axis, {is, x.strides}, [&](const std::array<int64_t, 2>& off) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t p = off[0] + i * step;
      copy_element(op + p * bytes, xp + (off[1] + idx[p] * xstep) * bytes, bytes);
    }
  });
}

// out = x; out[.., index[.., i, ..], ..] += src[.., i, ..]. A line along the
// axis writes only its own line of out, so lines run in parallel and each
// adds in order of i.
void scatter_add_kernel(const KernelArgs& a) {
  const TensorRef &x = a.in[0], &index = a.in[1], &src = a.in[2], &out = a.out[0];
  int axis = normalize_axis(a.attrs.i("axis"), x.rank(), "scatter_add");
  const int64_t size = x.shape[axis];
  std::vector<int64_t> idx = checked_indices(a, index, size, axis_range(axis, size));
  copy_input(out, x);
  const Strides is = contiguous_strides(index.shape);
  const int64_t n = index.shape[axis];
  visit_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      char* o = static_cast<char*>(out.data);
      const char* s = static_cast<const char*>(src.data);
      const int64_t ostep = out.strides[axis], sstep = src.strides[axis], step = is[axis];
      auto line = [&](const std::array<int64_t, 3>& off) {
        for (int64_t i = 0; i < n; ++i)
          add_into<T>(o + (off[1] + idx[off[0] + i * step] * ostep) * sizeof(T),
                      s + (off[2] + i * sstep) * sizeof(T), 1);
      };
      for_each_line<3>(index.shape, axis, {is, out.strides, src.strides}, line);
    }
  });
}

// out[o, j, :] = x[o, index[j], :] with x viewed as [outer, size, inner].
void take(const KernelArgs& a, int axis, const std::string& what) {
  const TensorRef &x = a.in[0], &index = a.in[1];
  AxisSplit s = split_at(x.shape, axis);
  std::vector<int64_t> idx = checked_indices(a, index, s.size, what);
  const int64_t m = int64_t(idx.size());
  const size_t row = size_t(s.inner) * itemsize(x.dtype);
  const char* xp = static_cast<const char*>(x.data);
  char* op = static_cast<char*>(a.out[0].data);
  parallel_for(s.outer * m, s.inner, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t o = r / m, j = r % m;
      std::memcpy(op + r * row, xp + (o * s.size + idx[j]) * row, row);
    }
  });
}

void index_select_kernel(const KernelArgs& a) {
  int axis = normalize_axis(a.attrs.i("axis"), a.in[0].rank(), "index_select");
  take(a, axis, axis_range(axis, a.in[0].shape[axis]));
}

void embedding_kernel(const KernelArgs& a) {
  take(a, 0, cat("a weight of ", a.in[0].shape[0], " rows"));
}

// out = x; out[o, index[j], c] += src[o, j, c]. Threads split the (o, c)
// lanes, which write disjoint outputs; each lane adds in order of j.
void index_add_kernel(const KernelArgs& a) {
  const TensorRef &x = a.in[0], &index = a.in[1], &src = a.in[2], &out = a.out[0];
  int axis = normalize_axis(a.attrs.i("axis"), x.rank(), "index_add");
  AxisSplit s = split_at(x.shape, axis);
  std::vector<int64_t> idx = checked_indices(a, index, s.size, axis_range(axis, s.size));
  const int64_t m = int64_t(idx.size());
  copy_input(out, x);
  visit_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      char* o = static_cast<char*>(out.data);
      const char* sp = static_cast<const char*>(src.data);
      parallel_for(s.outer * s.inner, m, [&](int64_t begin, int64_t end) {
        for (int64_t lane = begin; lane < end;) {
          int64_t outer = lane / s.inner, c0 = lane % s.inner;
          int64_t c1 = std::min(s.inner, c0 + (end - lane));
          for (int64_t j = 0; j < m; ++j)
            add_into<T>(o + ((outer * s.size + idx[j]) * s.inner + c0) * sizeof(T),
                        sp + ((outer * m + j) * s.inner + c0) * sizeof(T), c1 - c0);
          lane += c1 - c0;
        }
      });
    }
  });
}

void one_hot_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  int64_t classes = a.attrs.i("num_classes");
  std::vector<int64_t> idx = checked_indices(a, a.in[0], classes, cat("num_classes ", classes));
  const size_t size = itemsize(out.dtype);
  std::memset(out.data, 0, size_t(out.numel()) * size);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    char* op = static_cast<char*>(out.data);
    parallel_for(int64_t(idx.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) store<T>(op + (k * classes + idx[k]) * size, 1);
    });
  });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "gather", {gather_kernel, false}},
    {DeviceKind::cpu, "scatter_add", {scatter_add_kernel, false}},
    {DeviceKind::cpu, "index_select", {index_select_kernel, false}},
    {DeviceKind::cpu, "index_add", {index_add_kernel, false}},
    {DeviceKind::cpu, "embedding", {embedding_kernel, false}},
    {DeviceKind::cpu, "one_hot", {one_hot_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
