// kiln.Tensor: the C++ handle with its views, conversions, in-place methods
// and arithmetic operators; kiln.dtype; the factories. Ops are kiln.ops
// (ops.cc), attached as methods by the Python package.
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "python/src/bindings.h"

namespace kiln::python {

DType to_dtype(nb::handle h) {
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  // A type (numpy.float32, Python's float) goes by the name NumPy gives it.
  std::string s = nb::cast<std::string>(nb::str(
      PyType_Check(h.ptr()) ? nb::module_::import_("numpy").attr("dtype")(h) : nb::borrow(h)));
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  static const std::map<std::string, DType> long_names = {
      {"float32", DType::f32}, {"float", DType::f32},    {"bfloat16", DType::bf16},
      {"float16", DType::f16}, {"half", DType::f16},     {"float64", DType::f64},
      {"double", DType::f64},  {"int32", DType::i32},    {"int", DType::i32},
      {"int64", DType::i64},   {"long", DType::i64},     {"bool", DType::b8}};
  auto it = long_names.find(s);
  return it != long_names.end() ? it->second : parse_dtype(s);
}

Device to_device(nb::handle h) {
  if (h.is_none()) return kCPU;
  return parse_device(nb::cast<std::string>(nb::str(h)));
}

nb::list tensor_list(const std::vector<Tensor>& tensors) {
  nb::list out;
  for (const Tensor& t : tensors) out.append(t.defined() ? nb::cast(t) : nb::none());
  return out;
}

namespace {

Shape to_shape(const std::vector<int64_t>& dims) {
  KILN_CHECK(dims.size() <= size_t(kMaxRank), "a shape of ", dims.size(),
             " dimensions: kiln tensors have at most ", kMaxRank);
  return Shape(dims);
}

// reshape(2, 3) and reshape((2, 3)) alike.
std::vector<int64_t> dims_of(const nb::args& args) {
  if (args.size() == 1 && !nb::isinstance<nb::int_>(args[0]))
    return nb::cast<std::vector<int64_t>>(args[0]);
  return nb::cast<std::vector<int64_t>>(args);
}

nb::tuple shape_tuple(const Shape& s) {
  nb::list l;
  for (int64_t d : s) l.append(d);
  return nb::tuple(l);
}

// The host value of a one-element tensor as a Python number or bool.
nb::object item(const Tensor& t) {
  KILN_CHECK(t.numel() == 1, "item(): the tensor has ", t.numel(),
             " elements; only a one-element tensor converts to a Python number");
  nb::gil_scoped_release nogil_scope;
  DType d = t.dtype();
  if (d == DType::b8) {
    bool v = t.item<bool>();
    nb::gil_scoped_acquire gil;
    return nb::bool_(v);
  }
  if (is_integer(d)) {
    int64_t v = t.item<int64_t>();
    nb::gil_scoped_acquire gil;
    return nb::int_(v);
  }
  double v = t.item<double>();
  nb::gil_scoped_acquire gil;
  return nb::float_(v);
}

// Basic indexing: integers select, slices slice, None adds a dimension and
// one Ellipsis stands for the dimensions not named. The result is a view.
Tensor index(const Tensor& t, nb::handle key) {
  std::vector<nb::handle> items;
  if (nb::isinstance<nb::tuple>(key))
    for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(h);
  else
    items.push_back(key);
  int named = 0;
  for (nb::handle h : items)
    if (!h.is_none() && !h.is(Py_Ellipsis)) ++named;
  KILN_CHECK(named <= t.rank(), "too many indices (", named, ") for a tensor of ", t.rank(),
             " dimensions");
  Tensor out = t;
  int64_t axis = 0;
  bool ellipsis = false;
  for (nb::handle h : items) {
    if (h.is_none()) {
      out = out.unsqueeze(axis++);
    } else if (h.is(Py_Ellipsis)) {
      KILN_CHECK(!ellipsis, "an index may hold one Ellipsis (...)");
      ellipsis = true;
      axis += t.rank() - named;
    } else if (nb::isinstance<nb::slice>(h)) {
      auto [start, stop, step, length] = nb::borrow<nb::slice>(h).compute(out.dim(axis));
      KILN_CHECK(step > 0, "slices with a negative step are not supported (step ", step, ")");
      out = out.slice(axis++, start, start + int64_t(length) * step, step);
    } else if (nb::isinstance<nb::int_>(h)) {
      int64_t i = nb::cast<int64_t>(h), n = out.dim(axis);
      // IndexError, as Python's sequence protocol expects: it ends `for row in t`.
      if (i < -n || i >= n)
        throw nb::index_error(
            cat("index ", i, " is out of range for dimension ", axis, " of size ", n).c_str());
      out = out.select(axis, i < 0 ? i + n : i);
    } else {
      throw Error(cat("unsupported index ", nb::cast<std::string>(nb::repr(h)),
                      ": kiln tensors take integers, slices, None and ... (gather and "
                      "index_select are kiln.ops)"));
    }
  }
  return out;
}

// What kiln computes (or queues, waiting while the queue is full) runs
// without the GIL, so that other Python threads go on.
const nb::call_guard<nb::gil_scoped_release> nogil;

// An in-place method: f(tensor, arg) without the GIL, returning the tensor.
template <class Arg, class F>
auto in_place(F f) {
  return [f](nb::object self, Arg arg) {
    Tensor& t = nb::cast<Tensor&>(self);
    {
      nb::gil_scoped_release release;
      f(t, arg);
    }
    return self;
  };
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::enum_<DType>(m, "dtype", "Element types of tensors.")
      .value("float32", DType::f32)
      .value("bfloat16", DType::bf16)
      .value("float16", DType::f16)
      .value("float64", DType::f64)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("bool", DType::b8)
      .def_prop_ro("itemsize", [](DType d) { return itemsize(d); })
      .def_prop_ro("is_floating_point", [](DType d) { return is_floating(d); })
      .def_prop_ro("short_name", [](DType d) { return std::string(dtype_name(d)); });

  nb::class_<Tensor> tensor(m, "Tensor",
      "A kiln tensor: a materialized strided buffer on a device, or a pending value in a "
      "graph being recorded. Ops run asynchronously; reading values (item, tolist, NumPy) "
      "waits for them.");
  tensor.def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_prop_ro("ndim", &Tensor::rank)
      .def_prop_ro("device", [](const Tensor& t) { return to_string(t.device()); })
      .def_prop_ro("is_contiguous", &Tensor::is_contiguous)
      .def_prop_ro("is_materialized", [](const Tensor& t) { return t.impl().materialized(); })
      .def("numel", &Tensor::numel)
      .def("size", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
            return d ? nb::cast(t.dim(*d)) : nb::object(shape_tuple(t.shape()));
          }, nb::arg("dim") = nb::none())
      .def("__len__", [](const Tensor& t) {
            if (t.rank() == 0) throw nb::type_error("len() of a 0-d tensor");
            return t.dim(0);
          })
      // Views.
      .def("reshape", [](const Tensor& t, nb::args a) { return t.reshape(to_shape(dims_of(a))); })
      .def("view", [](const Tensor& t, nb::args a) { return t.reshape(to_shape(dims_of(a))); })
      .def("permute", [](const Tensor& t, nb::args a) { return t.permute(dims_of(a)); })
      .def("transpose", &Tensor::transpose, nb::arg("dim0"), nb::arg("dim1"))
      .def_prop_ro("T", [](const Tensor& t) {
            std::vector<int64_t> dims(t.rank());
            for (int i = 0; i < t.rank(); ++i) dims[i] = t.rank() - 1 - i;
            return t.permute(dims);
          })
      .def("t", &Tensor::t)
      .def("slice", &Tensor::slice, nb::arg("axis"), nb::arg("start"), nb::arg("stop"),
           nb::arg("step") = 1)
      .def("select", &Tensor::select, nb::arg("axis"), nb::arg("index"))
      .def("expand", [](const Tensor& t, nb::args a) { return t.expand(to_shape(dims_of(a))); })
      .def("squeeze", &Tensor::squeeze, nb::arg("axis"))
      .def("unsqueeze", &Tensor::unsqueeze, nb::arg("axis"))
      .def("flatten", &Tensor::flatten)
      .def("contiguous", &Tensor::contiguous, nogil)
      // .none(): nanobind refuses None for an argument unless told, and
      // t[None] adds a dimension.
      .def("__getitem__", &index, nb::arg("key").none())
      .def("__setitem__", [](const Tensor& t, nb::handle key, nb::handle value) {
            Tensor view = index(t, key);
            if (nb::isinstance<Tensor>(value))
              view.copy_(nb::cast<Tensor>(value));
            else
              view.fill_(nb::cast<double>(value));
          }, nb::arg("key").none(), nb::arg("value"))
      // Conversions.
      .def("to", [](const Tensor& t, nb::handle where) {
            if (nb::isinstance<nb::str>(where)) {
              std::string s = nb::cast<std::string>(where);
              if (s == "cpu" || s.rfind("cuda", 0) == 0) return t.to(parse_device(s));
            }
            return t.to(to_dtype(where));
          }, nb::arg("dtype_or_device"))
      .def("item", &item)
      .def("tolist", [](const Tensor& t) {
            // Through NumPy's nested lists, one element type per dtype.
            nb::object np = nb::module_::import_("numpy");
            Tensor host = t.dtype() == DType::bf16 || t.dtype() == DType::f16 ? t.to(DType::f32) : t;
            return np.attr("asarray")(nb::cast(host)).attr("tolist")();
          })
      .def("__str__", [](const Tensor& t) {
            nb::gil_scoped_release nogil;
            return t.to_string();
          })
      .def("__repr__", [](const Tensor& t) {
            if (!t.impl().materialized())
              return cat("kiln.Tensor(pending, ", ir::to_string(t.type()), ")");
            std::string s;
            {
              nb::gil_scoped_release nogil;
              s = t.to_string();
            }
            return s;
          })
      .def("__bool__", [](const Tensor& t) { return nb::cast<bool>(nb::bool_(item(t))); })
      .def("__float__", [](const Tensor& t) { return nb::cast<double>(item(t)); })
      .def("__int__", [](const Tensor& t) { return nb::cast<int64_t>(nb::int_(item(t))); })
      // In place; each returns the tensor itself.
      .def("copy_", in_place<const Tensor&>([](Tensor& t, const Tensor& s) { t.copy_(s); }), nb::arg("src"))
      .def("add_", in_place<const Tensor&>([](Tensor& t, const Tensor& o) { t.add_(o); }), nb::arg("other"))
      .def("mul_", in_place<const Tensor&>([](Tensor& t, const Tensor& o) { t.mul_(o); }), nb::arg("other"))
      .def("fill_", in_place<double>([](Tensor& t, double v) { t.fill_(v); }), nb::arg("value"))
      // Arithmetic: a Python number becomes a scalar of the tensor's dtype.
      .def(nb::self + nb::self, nogil)
      .def(nb::self - nb::self, nogil)
      .def(nb::self * nb::self, nogil)
      .def(nb::self / nb::self, nogil)
      .def(-nb::self, nogil)
      .def(nb::self + double(), nogil)
      .def(nb::self - double(), nogil)
      .def(nb::self * double(), nogil)
      .def(nb::self / double(), nogil)
      .def(double() + nb::self, nogil)
      .def(double() - nb::self, nogil)
      .def(double() * nb::self, nogil)
      .def(double() / nb::self, nogil)
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, nogil)
      .def("__pow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, nogil)
      .def("__pow__", [](const Tensor& a, double b) { return pow(a, b); }, nogil)
      .def("__abs__", [](const Tensor& a) { return abs(a); }, nogil)
      .def("__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, nogil)
      .def("__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, nogil)
      .def("__lt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, nogil)
      .def("__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); }, nogil)
      .def("__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, nogil)
      .def("__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, nogil)
      .def("__eq__", [](const Tensor& a, double b) { return eq(a, scalar(b, a.dtype(), a.device())); }, nogil)
      .def("__ne__", [](const Tensor& a, double b) { return ne(a, scalar(b, a.dtype(), a.device())); }, nogil)
      .def("__lt__", [](const Tensor& a, double b) { return lt(a, scalar(b, a.dtype(), a.device())); }, nogil)
      .def("__le__", [](const Tensor& a, double b) { return le(a, scalar(b, a.dtype(), a.device())); }, nogil)
      .def("__gt__", [](const Tensor& a, double b) { return gt(a, scalar(b, a.dtype(), a.device())); }, nogil)
      .def("__ge__", [](const Tensor& a, double b) { return ge(a, scalar(b, a.dtype(), a.device())); }, nogil)
      // Every op of kiln.ops is a method too: x.exp(), x.sum(axes=[0]).
      .def("__getattr__", [](nb::handle self, const std::string& name) -> nb::object {
            nb::object ops = nb::module_::import_("kiln.ops");
            if (name.empty() || name[0] == '_' || !nb::hasattr(ops, name.c_str()))
              throw nb::attribute_error(cat("kiln.Tensor has no attribute '", name, "'").c_str());
            return nb::module_::import_("functools").attr("partial")(ops.attr(name.c_str()), self);
          })
      .def("__hash__", [](const Tensor& t) { return std::hash<const void*>()(&t.impl()); });

  m.def("zeros", [](std::vector<int64_t> shape, nb::handle dtype, nb::handle device) {
          return zeros(to_shape(shape), dtype.is_none() ? DType::f32 : to_dtype(dtype), to_device(device));
        }, nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def("ones", [](std::vector<int64_t> shape, nb::handle dtype, nb::handle device) {
          return ones(to_shape(shape), dtype.is_none() ? DType::f32 : to_dtype(dtype), to_device(device));
        }, nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def("full", [](std::vector<int64_t> shape, double value, nb::handle dtype, nb::handle device) {
          return full(to_shape(shape), value, dtype.is_none() ? DType::f32 : to_dtype(dtype),
                      to_device(device));
        }, nb::arg("shape"), nb::arg("value"), nb::arg("dtype") = nb::none(),
        nb::arg("device") = nb::none());
  m.def("scalar", [](double value, nb::handle dtype, nb::handle device) {
          return scalar(value, dtype.is_none() ? DType::f32 : to_dtype(dtype), to_device(device));
        }, nb::arg("value"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def("arange", [](double start, std::optional<double> stop, double step, nb::handle dtype,
                     nb::handle device) {
          double lo = stop ? start : 0, hi = stop ? *stop : start;
          return arange(lo, hi, step, dtype.is_none() ? DType::i64 : to_dtype(dtype), to_device(device));
        }, nb::arg("start"), nb::arg("stop") = nb::none(), nb::arg("step") = 1,
        nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def("synchronize", [](nb::handle device) {
          Device d = to_device(device);
          nb::gil_scoped_release nogil;
          synchronize(d);
        }, nb::arg("device") = nb::none(),
        "Waits for the device's queued work; raises the first error it met.");
  m.def("memory_stats", [](nb::handle device) {
          MemoryStats s = memory_stats(to_device(device));
          nb::dict d;
          d["allocated"] = s.allocated;
          d["peak_allocated"] = s.peak_allocated;
          d["reserved"] = s.reserved;
          return d;
        }, nb::arg("device") = nb::none(), "The device allocator's statistics, in bytes.");
}

}  // namespace kiln::python
