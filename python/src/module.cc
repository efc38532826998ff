// NB_MODULE for kiln._kiln: kiln.Error, then each part's bindings.
#include "kiln/base/error.h"
#include "python/src/bindings.h"

NB_MODULE(_kiln, m) {
  namespace nb = nanobind;
  m.doc() = "kiln's C++ library; the package `kiln` is its Python face.";
  // Every kiln::Error surfaces as kiln.Error, carrying the C++ message.
  nb::exception<kiln::Error>(m, "Error");
  kiln::python::bind_tensor(m);
  kiln::python::bind_interop(m);
  kiln::python::bind_ops(m);
  kiln::python::bind_transforms(m);
  kiln::python::bind_models(m);
  kiln::python::bind_train(m);
  kiln::python::bind_random(m);
  kiln::python::bind_runtime(m);
}
