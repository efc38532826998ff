// NumPy and DLPack, both ways, without copying: a kiln tensor exports its
// strided buffer (kept alive by the exported array), and an imported array
// becomes a kiln tensor over the producer's memory (kept alive by the
// tensor's Storage). Writes through either side are seen by the other once
// kiln's queue has run them (kiln.synchronize()).
#include <nanobind/ndarray.h>

#include <mutex>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

using nb::dlpack::dtype_code;

nb::dlpack::dtype dl_dtype(DType d) {
  switch (d) {
    case DType::f32: return nb::dtype<float>();
    case DType::f64: return nb::dtype<double>();
    case DType::bf16: return {uint8_t(dtype_code::Bfloat), 16, 1};
    case DType::f16: return {uint8_t(dtype_code::Float), 16, 1};
    case DType::i32: return nb::dtype<int32_t>();
    case DType::i64: return nb::dtype<int64_t>();
    case DType::b8: return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

DType kiln_dtype(nb::dlpack::dtype t) {
  KILN_CHECK(t.lanes == 1, "DLPack arrays with ", int(t.lanes), " lanes have no kiln dtype");
  auto code = dtype_code(t.code);
  if (code == dtype_code::Float && t.bits == 32) return DType::f32;
  if (code == dtype_code::Float && t.bits == 64) return DType::f64;
  if (code == dtype_code::Float && t.bits == 16) return DType::f16;
  if (code == dtype_code::Bfloat && t.bits == 16) return DType::bf16;
  if (code == dtype_code::Int && t.bits == 32) return DType::i32;
  if (code == dtype_code::Int && t.bits == 64) return DType::i64;
  if (code == dtype_code::Bool && t.bits == 8) return DType::b8;
  throw Error(cat("an array of DLPack type code ", int(t.code), " with ", int(t.bits),
                  " bits has no kiln dtype (kiln has float32/64, bfloat16, float16, int32, int64, "
                  "bool): convert it first"));
}

// The tensor's buffer as an ndarray of framework F (the tensor rides along
// as its owner); waits for the work that writes it.
template <class... F>
nb::ndarray<F...> export_array(const Tensor& t) {
  {
    nb::gil_scoped_release nogil;
    ensure_materialized(t);
    synchronize(t.device());
  }
  const TensorImpl& im = t.impl();
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides(im.strides.begin(), im.strides.end());
  char* data = static_cast<char*>(im.storage->data) + im.offset * int64_t(itemsize(t.dtype()));
  nb::capsule owner(new Tensor(t), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  int device_type = t.device().kind == DeviceKind::cuda ? int(nb::device::cuda::value)
                                                        : int(nb::device::cpu::value);
  return nb::ndarray<F...>(data, shape.size(), shape.data(), owner, strides.data(),
                           dl_dtype(t.dtype()), device_type, t.device().index);
}

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Imported arrays whose storage a thread without the GIL released: a kiln
// worker finishing the last op that read one. That thread must not wait for
// the GIL, which a thread waiting for the worker may hold (an operator
// blocked on the full queue), so the interpreter drops them later
// (Py_AddPendingCall, callable without the GIL).
std::mutex released_mutex;
std::vector<nb::ndarray<>*> released;
bool drop_scheduled = false;

int drop_released(void*) {
  std::vector<nb::ndarray<>*> arrays;
  {
    std::lock_guard<std::mutex> lock(released_mutex);
    arrays.swap(released);
    drop_scheduled = false;
  }
  for (nb::ndarray<>* a : arrays) delete a;
  return 0;
}

void release_array(nb::ndarray<>* a) {
  if (!Py_IsInitialized() || finalizing()) return;  // the interpreter frees it
  if (PyGILState_Check()) {
    delete a;
    return;
  }
  std::lock_guard<std::mutex> lock(released_mutex);
  released.push_back(a);
  // A full pending-call queue refuses; the next release tries again.
  if (!drop_scheduled) drop_scheduled = Py_AddPendingCall(drop_released, nullptr) == 0;
}

// An array of any DLPack producer as a kiln tensor over the same memory.
Tensor import_array(nb::ndarray<> a) {
  DType dtype = kiln_dtype(a.dtype());
  Device device;
  if (a.device_type() == nb::device::cuda::value)
    device = Device{DeviceKind::cuda, int(a.device_id())};
  else
    KILN_CHECK(a.device_type() == nb::device::cpu::value, "an array on DLPack device type ",
               a.device_type(), ": kiln takes CPU and CUDA memory");
  KILN_CHECK(a.ndim() <= size_t(kMaxRank), "an array of ", a.ndim(),
             " dimensions: kiln tensors have at most ", kMaxRank);
  Shape shape;
  Strides strides;
  int64_t last = 0;  // the furthest element, in elements from the first
  bool empty = false;
  for (size_t i = 0; i < a.ndim(); ++i) {
    int64_t n = int64_t(a.shape(i)), s = a.stride(i);
    KILN_CHECK(s >= 0, "an array with a negative stride (dimension ", i,
               "): kiln views have none; pass a copy (numpy.ascontiguousarray)");
    shape.push_back(n);
    strides.push_back(s);
    if (n == 0) empty = true;
    else last += (n - 1) * s;
  }
  size_t bytes = empty ? 0 : size_t(last + 1) * itemsize(dtype);
  // The array (and so its producer's buffer) lives as long as the storage.
  auto* keep = new nb::ndarray<>(a);
  auto release = [keep] { release_array(keep); };
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->device = device;
  impl->strides = strides;
  impl->storage = std::make_shared<Storage>(device, a.data(), bytes, release);
  return Tensor(impl);
}

}  // namespace

void bind_interop(nb::module_& m) {
  nb::class_<Tensor> tensor = nb::borrow<nb::class_<Tensor>>(m.attr("Tensor"));
  auto numpy_array = [](const Tensor& t) {
    KILN_CHECK(t.device() == kCPU, "a tensor on ", to_string(t.device()),
               " converts to NumPy after .to(\"cpu\")");
    KILN_CHECK(t.dtype() != DType::bf16, "NumPy has no bfloat16: convert with "
               ".to(kiln.float32), or use torch.from_dlpack(t)");
    return export_array<nb::numpy>(t);
  };
  tensor.def("numpy", numpy_array, "The buffer as a NumPy array (no copy).")
      .def("__array__", [numpy_array](const Tensor& t, nb::handle dtype, nb::handle copy) {
            nb::object a = nb::cast(numpy_array(t));
            if (!dtype.is_none()) a = a.attr("astype")(dtype, nb::arg("copy") = false);
            if (!copy.is_none() && nb::cast<bool>(nb::bool_(copy))) a = a.attr("copy")();
            return a;
          }, nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def("__dlpack__", [](const Tensor& t, nb::kwargs kwargs) {
            return nb::cast(export_array<nb::array_api>(t)).attr("__dlpack__")(**kwargs);
          }, "A DLPack capsule of the buffer (no copy).")
      .def("__dlpack_device__", [](const Tensor& t) {
            int kind = t.device().kind == DeviceKind::cuda ? int(nb::device::cuda::value)
                                                           : int(nb::device::cpu::value);
            return nb::make_tuple(kind, t.device().index);
          });
  m.def("from_dlpack", &import_array, nb::arg("array"),
        "A kiln tensor over the memory of any DLPack producer (NumPy, PyTorch, JAX), without "
        "copying; the producer's buffer lives as long as the tensor.");
  // Tried after the writable overload: an error that says why, rather than
  // nanobind's "incompatible function arguments".
  m.def("from_dlpack", [](nb::ndarray<nb::ro>) -> Tensor {
    throw Error("a read-only array: kiln tensors are writable, so kiln takes no read-only "
                "memory without copying; pass a copy (kiln.from_numpy copies read-only arrays)");
  }, nb::arg("array"));
}

}  // namespace kiln::python
