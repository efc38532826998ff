#include "kiln/ops/declare.h"

#include <algorithm>

namespace kiln::ops {

std::vector<TypeInfo> same_as_first(std::span<const TypeInfo> in, const Attrs&) {
  return {in[0]};
}

TypeInfo broadcast_types(std::span<const TypeInfo> in, std::optional<DType> out) {
  TypeInfo t = in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    KILN_CHECK(in[i].dtype == in[0].dtype, "input dtypes differ (", dtype_name(in[0].dtype), " and ",
               dtype_name(in[i].dtype), "); convert one with .to(dtype)");
    t.shape = broadcast_shapes(t.shape, in[i].shape, "broadcast");
  }
  if (out) t.dtype = *out;
  return t;
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int rank, const char* what) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, what));
  std::sort(out.begin(), out.end());
  KILN_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), what,
             ": an axis is listed twice");
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim,
                    const char* what) {
  std::vector<int64_t> ax = normalize_axes(axes, shape.size(), what);
  Shape out;
  for (int i = 0; i < shape.size(); ++i) {
    bool reduced = std::find(ax.begin(), ax.end(), i) != ax.end();
    if (!reduced) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  int lead = grad.rank() - shape.size();
  std::vector<int64_t> axes;
  for (int i = 0; i < grad.rank(); ++i)
    if (i < lead || (shape[i - lead] == 1 && grad.shape()[i] != 1)) axes.push_back(i);
  if (axes.empty()) return grad.reshape(shape);
  Tensor s = apply1(KILN_OP("sum"), {grad}, {{"axes", axes}, {"keepdim", true}});
  return s.reshape(shape);
}

}  // namespace kiln::ops
