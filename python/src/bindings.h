// kiln._kiln, the extension module under the Python package: one bind_*
// function per file, and the conversions they share.
#pragma once
#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/tensor.h"

namespace kiln::python {

namespace nb = nanobind;

void bind_tensor(nb::module_& m);      // tensor.cc: Tensor, dtypes, factories
void bind_interop(nb::module_& m);     // interop.cc: NumPy and DLPack, both ways
void bind_ops(nb::module_& m);         // ops.cc: the op registry
void bind_transforms(nb::module_& m);  // transforms.cc: value_and_grad, compile, eager modes
void bind_models(nb::module_& m);      // models.cc: CausalLM, AdamW, generation, tokenizers
void bind_train(nb::module_& m);       // train.cc: the trainer
void bind_random(nb::module_& m);      // random.cc: Generator, random draws, dropout, stack
void bind_runtime(nb::module_& m);     // runtime.cc: background compiles, the dispatch reference

// A kiln.dtype, or a name: kiln's ("f32", "bf16"), PyTorch's and NumPy's
// ("float32", "torch.bfloat16", numpy.dtype("int64"), numpy.int64).
DType to_dtype(nb::handle h);
// None (the CPU), a device string ("cpu", "cuda:0").
Device to_device(nb::handle h);
// Tensors as Python values: undefined ones (no gradient) become None.
nb::list tensor_list(const std::vector<Tensor>& tensors);

}  // namespace kiln::python
