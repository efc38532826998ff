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

// The same moves started apart from the device's kernels (a CUDA copy
// stream): only the activation policy emits them, each read through a
// transfer_wait, so they have no vjp.
[[maybe_unused]] const OpDef& kOffloadStart = declare({
    .name = "offload_start",
    .infer = same_as_first,
    .fusion = ir::FusionClass::opaque,
    .offloaded_output = [](const Attrs&, size_t) { return true; },
});

[[maybe_unused]] const OpDef& kReloadStart = declare({
    .name = "reload_start",
    .infer = same_as_first,
    .fusion = ir::FusionClass::opaque,
});

// transfer_wait(moved, source): the work after it waits for the transfer
// into `moved`, which it yields in the same buffer (the memory plan aliases
// them). Reading `source` keeps it live and unchanged while the transfer
// reads it. `offloaded`: `moved` is in the offload pool (an offload's).
[[maybe_unused]] const OpDef& kTransferWait = declare({
    .name = "transfer_wait",
    .num_inputs = 2,
    .attrs = {{"offloaded", AttrKind::bool_, false}},
    .infer = [](auto in, const Attrs&) { return std::vector<TypeInfo>{in[0]}; },
    .fusion = ir::FusionClass::opaque,
    .cost = [](auto, auto, const Attrs&) { return ir::Cost{}; },
    .aliases_first_input = true,
    .offloaded_output = [](const Attrs& a, size_t) { return a.b("offloaded"); },
});

}  // namespace
}  // namespace ops

Tensor offload(const Tensor& x) { return apply1(ops::kOffload, {x}, {}); }
Tensor reload(const Tensor& x) { return apply1(ops::kReload, {x}, {}); }

}  // namespace kiln
