// The topk kernel: each line along the axis is copied out, partially sorted
// by (value descending, index ascending; NaN largest) and written back, in
// parallel over lines. The order is total, so results never depend on the
// thread count or the sort's internals.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kiln/backend/cpu/loops.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

void topk_kernel(const KernelArgs& a) {
  const TensorRef& x = a.in[0];
  const int axis = normalize_axis(a.attrs.i("axis"), x.shape.size(), "topk");
  const int64_t k = a.attrs.i("k"), n = x.shape[axis];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  int64_t* indices = a.out[1].ptr<int64_t>();
  if (k == 0 || outer * inner == 0) return;
  visit_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail("topk: bool input");  // the shape rule rejects it
    } else {
      using C = compute_t<T>;
      const T* in = x.ptr<T>();
      T* values = a.out[0].ptr<T>();
      parallel_for(outer * inner, n, [&](int64_t b, int64_t e) {
        std::vector<C> v(static_cast<size_t>(n));
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t line = b; line < e; ++line) {
          const int64_t o = line / inner, i = line % inner;
          const T* p = in + o * n * inner + i;
          for (int64_t j = 0; j < n; ++j) v[j] = widen(p[j * inner]);
          std::iota(order.begin(), order.end(), int64_t{0});
          auto before = [&](int64_t l, int64_t r) {
            C vl = v[l], vr = v[r];
            bool nl = vl != vl, nr = vr != vr;
            if (nl != nr) return nl;
            if (!nl && vl != vr) return vl > vr;
            return l < r;
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          const int64_t base = o * k * inner + i;
          for (int64_t j = 0; j < k; ++j) {
            values[base + j * inner] = p[order[j] * inner];
            indices[base + j * inner] = order[j];
          }
        }
      });
    }
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "topk", {topk_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
