#include "kiln/ops/offload.h"

#include "kiln/ops/declare.h"

namespace kiln {
namespace ops {
namespace {

// Opaque, so no pass fuses, merges or looks through them, and without a
// composite: a backend that cannot offload says so instead of keeping the
// activation on the device under another name.
const OpDef& kOffload = declare({
    .name = "offload",
    .infer = same_as_first,
    .fusion = ir::FusionClass::opaque,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0); },
    .offloaded_output = [](const Attrs&, size_t) { return true; },
});

const OpDef& kReload = declare({
    .name = "reload",
    .infer = same_as_first,
    .fusion = ir::FusionClass::opaque,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0); },
});

}  // namespace
}  // namespace ops

Tensor offload(const Tensor& x) { return apply1(ops::kOffload, {x}, {}); }
Tensor reload(const Tensor& x) { return apply1(ops::kReload, {x}, {}); }

}  // namespace kiln
