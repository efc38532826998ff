// Random numbers: kiln.Generator (a Philox seed and counter, advanced by
// each draw, so a sequence of draws is reproducible from the seed) and the
// draws of kiln/ops/random.h; dropout. Also stack (kiln/ops/shape.h), a
// composite of registered ops, so absent from kiln.ops.
#include <nanobind/stl/vector.h>

#include "kiln/ops/random.h"
#include "kiln/ops/shape.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

DType dtype_or(nb::handle h, DType fallback) { return h.is_none() ? fallback : to_dtype(h); }

}  // namespace

void bind_random(nb::module_& m) {
  nb::class_<Generator>(m, "Generator",
      "A random stream: Philox counters from `seed`, starting at `offset`; each draw reserves "
      "the counters it uses.")
      .def(nb::init<uint64_t, uint64_t>(), nb::arg("seed"), nb::arg("offset") = 0)
      .def_prop_ro("seed", &Generator::seed)
      .def_prop_ro("offset", &Generator::offset);
  auto shape_of = [](const std::vector<int64_t>& dims) { return Shape(dims); };
  m.def("rand", [shape_of](std::vector<int64_t> shape, Generator& g, nb::handle dtype,
                           nb::handle device) {
          return rand(shape_of(shape), g, dtype_or(dtype, DType::f32), to_device(device));
        }, nb::arg("shape"), nb::arg("generator"), nb::arg("dtype") = nb::none(),
        nb::arg("device") = nb::none(), "Uniform in [0, 1).");
  m.def("randn", [shape_of](std::vector<int64_t> shape, Generator& g, nb::handle dtype,
                            nb::handle device) {
          return randn(shape_of(shape), g, dtype_or(dtype, DType::f32), to_device(device));
        }, nb::arg("shape"), nb::arg("generator"), nb::arg("dtype") = nb::none(),
        nb::arg("device") = nb::none(), "Standard normal.");
  m.def("uniform", [shape_of](std::vector<int64_t> shape, double low, double high, Generator& g,
                              nb::handle dtype, nb::handle device) {
          return uniform(shape_of(shape), low, high, g, dtype_or(dtype, DType::f32),
                         to_device(device));
        }, nb::arg("shape"), nb::arg("low"), nb::arg("high"), nb::arg("generator"),
        nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(), "Uniform in [low, high).");
  m.def("normal", [shape_of](std::vector<int64_t> shape, double mean, double stddev,
                             Generator& g, nb::handle dtype, nb::handle device) {
          return normal(shape_of(shape), mean, stddev, g, dtype_or(dtype, DType::f32),
                        to_device(device));
        }, nb::arg("shape"), nb::arg("mean"), nb::arg("stddev"), nb::arg("generator"),
        nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def("bernoulli", [shape_of](std::vector<int64_t> shape, double p, Generator& g,
                                nb::handle dtype, nb::handle device) {
          return bernoulli(shape_of(shape), p, g, dtype_or(dtype, DType::b8), to_device(device));
        }, nb::arg("shape"), nb::arg("p"), nb::arg("generator"), nb::arg("dtype") = nb::none(),
        nb::arg("device") = nb::none(), "1 with probability p, else 0.");
  m.def("dropout", [](const Tensor& x, double p, Generator& g) { return dropout(x, p, g); },
        nb::arg("x"), nb::arg("p"), nb::arg("generator"),
        "Inverted dropout: each element zeroed with probability p, the rest scaled by "
        "1 / (1 - p); differentiable (the gradient reuses the mask).");
  m.def("stack", [](const std::vector<Tensor>& tensors) { return stack(tensors); },
        nb::arg("tensors"), "Joins tensors of one shape along a new leading dimension.");
}

}  // namespace kiln::python
