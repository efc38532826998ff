// The transforms on Python callables: value_and_grad, compile, and the
// eager-mode scopes. A Python function becomes a kiln::TensorFn that takes
// the GIL to run; kiln computes with the GIL released.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/unique_ptr.h>

#include <memory>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

// The callable, shared by copies of the TensorFn, which kiln may copy and
// drop without the GIL: the last owner drops it under the GIL.
using HeldFn = std::shared_ptr<nb::object>;
HeldFn hold(nb::callable fn) {
  return HeldFn(new nb::object(std::move(fn)), [](nb::object* o) {
    nb::gil_scoped_acquire gil;
    delete o;
  });
}

// fn(list of tensors) -> a tensor or a list/tuple of tensors.
TensorFn python_fn(HeldFn f) {
  return [f = std::move(f)](const std::vector<Tensor>& args) {
    nb::gil_scoped_acquire gil;
    KILN_CHECK(f->is_valid(), "the Python function was cleared by the garbage collector");
    nb::object out = (*f)(tensor_list(args));
    if (nb::isinstance<Tensor>(out)) return std::vector<Tensor>{nb::cast<Tensor>(out)};
    try {
      return nb::cast<std::vector<Tensor>>(out);
    } catch (const nb::cast_error&) {
      throw Error(cat("a traced function returned ", nb::cast<std::string>(nb::repr(out.type())),
                      ": it must return a kiln.Tensor or a list or tuple of them"));
    }
  };
}

struct ValueAndGradFn {
  HeldFn held;
  std::function<ValueAndGrad(const std::vector<Tensor>&)> fn;
  nb::tuple call(const std::vector<Tensor>& args) const {
    ValueAndGrad r;
    {
      nb::gil_scoped_release nogil;
      r = fn(args);
    }
    return nb::make_tuple(tensor_list(r.values), tensor_list(r.grads));
  }
};

struct CompiledFn {
  HeldFn held;
  CompiledFunction compiled;
};

// Python's garbage collector sees the callable a transform holds, so a
// cycle through it (a closure that refers to its own compiled function) is
// collected: traverse reports it, clear drops it.
template <class T>
int traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  if (const HeldFn& f = nb::inst_ptr<T>(self)->held) Py_VISIT(f->ptr());
  return 0;
}
template <class T>
int clear(PyObject* self) {
  if (const HeldFn& f = nb::inst_ptr<T>(self)->held) *f = nb::object();
  return 0;
}
template <class T>
PyType_Slot gc_slots[] = {{Py_tp_traverse, (void*)traverse<T>},
                          {Py_tp_clear, (void*)clear<T>},
                          {0, nullptr}};

struct EagerModeScope {
  EagerMode mode;
  std::unique_ptr<EagerModeGuard> guard;
};

}  // namespace

void bind_transforms(nb::module_& m) {
  nb::class_<ValueAndGradFn>(m, "ValueAndGrad", nb::type_slots(gc_slots<ValueAndGradFn>))
      .def("__call__", &ValueAndGradFn::call, nb::arg("args"),
           "(values, grads) for a list of tensors: everything the function returned, and d "
           "values[0] / d args[i] (None for integer arguments).");
  m.def("value_and_grad", [](nb::callable fn) {
    HeldFn held = hold(std::move(fn));
    return ValueAndGradFn{held, value_and_grad(python_fn(held))};
  }, nb::arg("fn"),
     "fn: a function of a list of tensors whose first result is a floating scalar (the loss).");

  nb::class_<CompiledFn>(m, "CompiledFunction", nb::type_slots(gc_slots<CompiledFn>))
      .def("__init__", [](CompiledFn* self, nb::callable fn, std::string name,
                          std::vector<int> donate, bool background, bool replay) {
            CompileOptions o;
            o.name = std::move(name);
            o.donate = std::move(donate);
            o.compile_in_background = background;
            o.replay = replay;
            HeldFn held = hold(std::move(fn));
            new (self) CompiledFn{held, CompiledFunction(python_fn(held), o)};
          }, nb::arg("fn"), nb::arg("name") = "compiled function",
          nb::arg("donate") = std::vector<int>{}, nb::arg("background") = false,
          nb::arg("replay") = false)
      .def("__call__", [](CompiledFn& f, const std::vector<Tensor>& args,
                          const std::string& static_key) {
            std::vector<Tensor> out;
            {
              nb::gil_scoped_release nogil;
              out = f.compiled(args, static_key);
            }
            return tensor_list(out);
          }, nb::arg("args"), nb::arg("static_key") = "")
      .def_prop_ro("num_signatures", [](const CompiledFn& f) { return f.compiled.num_signatures(); });

  nb::class_<EagerModeScope>(m, "EagerModeScope")
      .def("__init__", [](EagerModeScope* self, const std::string& mode) {
            new (self) EagerModeScope{parse_eager_mode(mode), nullptr};
          }, nb::arg("mode"))
      .def("__enter__", [](EagerModeScope& s) {
            KILN_CHECK(!s.guard, "this eager_mode scope is already entered");
            s.guard = std::make_unique<EagerModeGuard>(s.mode);
          })
      .def("__exit__", [](EagerModeScope& s, nb::args) {
            s.guard.reset();
            return false;
          });
  m.def("get_eager_mode", [] { return std::string(eager_mode_name(eager_mode())); },
        "The thread's eager mode: strict, debug or defer_and_fuse.");
}

}  // namespace kiln::python
