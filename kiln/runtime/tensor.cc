#include "kiln/runtime/tensor.h"

#include <cstring>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/rules.h"
#include "kiln/runtime/view_chain.h"

namespace kiln {

TensorImpl& Tensor::impl() const {
  KILN_CHECK(impl_, "use of an undefined tensor (a default-constructed kiln::Tensor)");
  return *impl_;
}

int64_t Tensor::dim(int64_t axis) const { return shape()[normalize_axis(axis, rank(), "dim")]; }

bool Tensor::is_contiguous() const {
  const TensorImpl& i = impl();
  return i.materialized() && kiln::is_contiguous(i.shape, i.strides);
}

Tensor Tensor::reshape(const Shape& s) const {
  Shape target = s;
  int64_t known = 1;
  int infer = -1;
  for (int i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      KILN_CHECK(infer < 0, "reshape: only one dimension may be -1, got ", s);
      infer = i;
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known > 0 && numel() % known == 0, "reshape: cannot infer the -1 in ", s,
               " for ", numel(), " elements");
    target[infer] = numel() / known;
  }
  return apply1(KILN_OP("reshape"), {*this}, {{"shape", target.vec()}});
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return apply1(KILN_OP("permute"), {*this}, {{"dims", dims}});
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  int r = rank();
  int ia = normalize_axis(a, r, "transpose"), ib = normalize_axis(b, r, "transpose");
  std::vector<int64_t> dims(r);
  for (int i = 0; i < r; ++i) dims[i] = i;
  std::swap(dims[ia], dims[ib]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  return apply1(KILN_OP("slice"), {*this},
                {{"axis", axis}, {"start", start}, {"stop", stop}, {"step", step}});
}

Tensor Tensor::select(int64_t axis, int64_t index) const {
  int a = normalize_axis(axis, rank(), "select");
  int64_t n = shape()[a];
  KILN_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for axis ", a,
             " of size ", n);
  if (index < 0) index += n;
  return slice(a, index, index + 1).squeeze(a);
}

Tensor Tensor::expand(const Shape& s) const {
  return apply1(KILN_OP("expand"), {*this}, {{"shape", s.vec()}});
}

Tensor Tensor::squeeze(int64_t axis) const {
  return apply1(KILN_OP("squeeze"), {*this}, {{"axis", axis}});
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  return apply1(KILN_OP("unsqueeze"), {*this}, {{"axis", axis}});
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  // A pending dense value is returned itself too, so that writes into the
  // result reach the tensor in every mode, as in eager mode.
  if (!impl().materialized()) {
    std::optional<ir::Layout> l = chain_layout(impl());
    if (l && kiln::is_contiguous(l->shape, l->strides)) return *this;
  }
  return apply1(KILN_OP("copy"), {*this});
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  return apply1(KILN_OP("cast"), {*this}, {{"dtype", t}});
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  Tensor c = contiguous();
  ensure_materialized(c);
  std::vector<char> host(size_t(numel()) * itemsize(dtype()));
  synchronize(device());
  const TensorImpl& i = c.impl();
  backend(device()).copy_to_host(host.data(),
                                 static_cast<char*>(i.storage->data) + i.offset * itemsize(i.dtype),
                                 host.size(), device().index);
  return from_host(host.data(), dtype(), shape(), d);
}

namespace {

// The tensor's elements, row-major, as raw host bytes of its dtype.
std::vector<char> host_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  ensure_materialized(c);
  synchronize(c.device());
  const TensorImpl& i = c.impl();
  std::vector<char> host(size_t(t.numel()) * itemsize(t.dtype()));
  if (!host.empty())
    backend(c.device()).copy_to_host(host.data(),
                                     static_cast<char*>(i.storage->data) + i.offset * itemsize(i.dtype),
                                     host.size(), c.device().index);
  return host;
}

template <class T, class S>
T convert(S s) {
  if constexpr (std::is_same_v<S, bf16> || std::is_same_v<S, f16>) {
    return convert<T>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
    return T(static_cast<float>(s));
  } else {
    return static_cast<T>(s);
  }
}

}  // namespace

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<char> raw = host_bytes(*this);
  std::vector<T> out(static_cast<size_t>(numel()));
  visit_dtype(dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* src = reinterpret_cast<const S*>(raw.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(src[i]);
  });
  return out;
}

template <class T>
T Tensor::item() const {
  KILN_CHECK(numel() == 1, "item() needs a tensor with one element, this one is ",
             ir::to_string(type()));
  return to_vector<T>()[0];
}

#define KILN_INSTANTIATE(T)                              \
  template std::vector<T> Tensor::to_vector<T>() const;  \
  template T Tensor::item<T>() const;                    \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, Device);
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
KILN_INSTANTIATE(int32_t)
KILN_INSTANTIATE(int64_t)
KILN_INSTANTIATE(bf16)
KILN_INSTANTIATE(f16)
#undef KILN_INSTANTIATE
template std::vector<bool> Tensor::to_vector<bool>() const;
template bool Tensor::item<bool>() const;

std::string Tensor::to_string() const {
  std::vector<double> v = to_vector<double>();
  std::ostringstream os;
  os << "tensor(" << ir::to_string(type()) << ", ";
  const Shape& s = shape();
  constexpr int64_t kEdge = 3;  // elements shown at each end of a long dimension
  auto rec = [&](auto&& self, int axis, int64_t base, int64_t stride) -> void {
    if (axis == s.size()) {
      os << v[size_t(base)];
      return;
    }
    int64_t inner = stride / std::max<int64_t>(s[axis], 1);
    os << '[';
    for (int64_t i = 0; i < s[axis]; ++i) {
      if (s[axis] > 2 * kEdge && i == kEdge) {
        os << ", ...";
        i = s[axis] - kEdge - 1;
        continue;
      }
      if (i) os << ", ";
      self(self, axis + 1, base + i * inner, inner);
    }
    os << ']';
  };
  rec(rec, 0, 0, numel());
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

Tensor& Tensor::copy_(const Tensor& src) {
  Tensor value = src.to(dtype());
  if (value.shape() != shape()) value = value.expand(shape());
  current_context().assign(*this, value);
  return *this;
}

Tensor& Tensor::add_(const Tensor& other) {
  return copy_(apply1(KILN_OP("add"), {*this, other.to(dtype())}));
}

Tensor& Tensor::mul_(const Tensor& other) {
  return copy_(apply1(KILN_OP("mul"), {*this, other.to(dtype())}));
}

Tensor& Tensor::fill_(double value) { return copy_(scalar(value, dtype(), device())); }

template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device) {
  KILN_CHECK(int64_t(data.size()) == shape.numel(), "from_vector: ", data.size(),
             " values do not fill shape ", shape, " (", shape.numel(), " elements)");
  return from_host(data.data(), dtype_of<T>::value, shape, device);
}

template <>
Tensor from_vector<bool>(const std::vector<bool>& data, const Shape& shape, Device device) {
  std::vector<uint8_t> bytes(data.begin(), data.end());
  KILN_CHECK(int64_t(bytes.size()) == shape.numel(), "from_vector: ", bytes.size(),
             " values do not fill shape ", shape, " (", shape.numel(), " elements)");
  return from_host(bytes.data(), DType::b8, shape, device);
}

Tensor from_host(const void* data, DType dtype, const Shape& shape, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->device = device;
  impl->strides = contiguous_strides(shape);
  size_t bytes = size_t(shape.numel()) * itemsize(dtype);
  impl->storage = std::make_shared<Storage>(device, bytes);
  if (bytes) backend(device).copy_from_host(impl->storage->data, data, bytes, device.index);
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return apply1(KILN_OP("full"), {}, {{"shape", shape.vec()}, {"value", value}, {"dtype", dtype}},
                device);
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }
Tensor scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }
Tensor zeros_like(const Tensor& t) { return full(t.shape(), 0, t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return full(t.shape(), 1, t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  return apply1(KILN_OP("arange"), {},
                {{"start", start}, {"stop", stop}, {"step", step}, {"dtype", dtype}}, device);
}

void synchronize(Device device) { backend(device).queue(device.index).synchronize(); }

Tensor VjpCall::cot(size_t i) const {
  if (cotangents[i].defined()) return cotangents[i];
  return zeros_like(outputs[i]);
}

}  // namespace kiln
