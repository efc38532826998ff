// kiln::Tensor: a cheap handle to either a materialized strided buffer on a
// device or a pending value in a graph being recorded (a trace, or the
// deferred region of defer_and_fuse). Every op goes through dispatch, which
// hands it to the current context; the handle itself never runs kernels.
#pragma once
#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/device.h"

namespace kiln {

struct Storage;
class Recording;

struct TensorImpl {
  DType dtype = DType::f32;
  Shape shape;
  Device device;
  // Materialized: a strided view of `storage`.
  std::shared_ptr<Storage> storage;
  Strides strides;
  int64_t offset = 0;  // in elements
  // Pending: value `value` of the graph `recording` is building.
  std::shared_ptr<Recording> recording;
  ir::ValueId value = -1;
  // A pending view: the view op applied to `view_base` (view_chain.h). Once
  // materialized (defer_and_fuse) it aliases its base's storage as in eager
  // mode; in a trace a write through it updates the base, and `value` is
  // re-derived when the base's value is no longer `view_source`.
  std::shared_ptr<TensorImpl> view_base;
  const ir::OpDef* view_op = nullptr;
  ir::Attrs view_attrs;
  ir::ValueId view_source = -1;

  bool materialized() const { return storage != nullptr; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return impl().shape.size(); }
  int64_t dim(int64_t axis) const;  // negative counts from the end
  int64_t numel() const { return impl().shape.numel(); }
  Device device() const { return impl().device; }
  ir::TypeInfo type() const { return {dtype(), shape()}; }
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_contiguous() const;  // materialized and row-major dense

  // Views: metadata over the same storage in eager modes (a copy only where
  // a view cannot express the result, as for reshaping a transpose).
  Tensor reshape(const Shape& shape) const;  // one entry may be -1
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const { return transpose(-2, -1); }
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor select(int64_t axis, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t axis) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten() const { return reshape({-1}); }
  Tensor contiguous() const;

  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  // Host access; each is a synchronisation point.
  template <class T> T item() const;
  template <class T> std::vector<T> to_vector() const;  // converted to T
  std::string to_string() const;

  // In-place writes, visible through every view of the same base in every
  // mode (in traced code a write through a view updates its base).
  Tensor& copy_(const Tensor& src);  // src broadcasts to this shape; dtype converts
  Tensor& add_(const Tensor& other);
  Tensor& mul_(const Tensor& other);
  Tensor& fill_(double value);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Factories.
template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device = kCPU);
template <>
Tensor from_vector<bool>(const std::vector<bool>& data, const Shape& shape, Device device);
Tensor from_host(const void* data, DType dtype, const Shape& shape, Device device = kCPU);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = kCPU);
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
Tensor scalar(double value, DType dtype = DType::f32, Device device = kCPU);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// [start, stop) by step, as i64 unless dtype says otherwise.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::i64,
              Device device = kCPU);

// Waits for all queued work on the device; rethrows the first error.
void synchronize(Device device = kCPU);

// A function of tensors: what compile() and value_and_grad() take.
using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// Named tensors in a chosen order (checkpoints, safetensors files).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

}  // namespace kiln
