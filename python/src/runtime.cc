// The runtime's process-wide controls: waiting for background kernel
// builds, and the C++ loop bench/python_overhead.py measures Python's
// per-op cost against.
#include <chrono>

#include "kiln/ops/elementwise.h"
#include "kiln/runtime/compile_pool.h"
#include "python/src/bindings.h"

namespace kiln::python {

void bind_runtime(nb::module_& m) {
  m.def("wait_for_compiles", [] {
    nb::gil_scoped_release nogil;
    wait_for_compile_jobs();
  }, "Waits for the kernel builds running in the background (compile pool); their "
     "programs then run compiled.");
  m.def("pending_compiles", &pending_compile_jobs, "Kernel builds still running.");
  m.def("_dispatch_loop", [](const Tensor& a, const Tensor& b, int64_t iterations) {
    nb::gil_scoped_release nogil;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; ++i) Tensor c = a + b;
    synchronize(a.device());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }, nb::arg("a"), nb::arg("b"), nb::arg("iterations"),
     "Seconds for `iterations` of a + b dispatched from C++ (bench/python_overhead.py).");
}

}  // namespace kiln::python
