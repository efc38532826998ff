#include "kiln/runtime/eager.h"

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/defer.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel_launch.h"
#include "kiln/runtime/rules.h"

namespace kiln {
namespace {

thread_local int64_t t_eager_ops = 0;

TensorRef ref_of(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  return {static_cast<char*>(impl.storage->data) + impl.offset * int64_t(itemsize(impl.dtype)),
          impl.dtype, impl.shape, impl.strides};
}


// Raises if a floating output of a debug-mode op holds NaN or Inf. The
// search runs on the device (its queue), so only the verdict moves.
void check_finite(const Tensor& t, size_t index, const std::string& label) {
  if (!is_floating(t.dtype()) || t.numel() == 0) return;
  Device device = t.device();
  Backend* b = &backend(device);
  NonFinite found;
  b->queue(device.index).enqueue(
      [b, &found, r = ref_of(t), keep = t.impl().storage] { found = b->find_non_finite(r); },
      cat(label, "'s NaN/Inf check"));
  b->queue(device.index).synchronize();
  if (found.index < 0) return;
  fail("debug mode: ", label, " produced ", found.nan ? "NaN" : "Inf", " in output ", index, " (",
       ir::to_string(t.type()), ") at flat index ", found.index,
       "; check this op's inputs (KILN_EAGER_MODE=debug checks every op)");
}

class EagerContext final : public Context {
 public:
  explicit EagerContext(bool debug) : debug_(debug) {}

  std::vector<Tensor> apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                            const ir::Attrs& attrs, std::span<const ir::TypeInfo> out_types,
                            Device device) override {
    ++t_eager_ops;
    backend(device);  // a missing device is reported as such, not as a missing kernel
    for (const Tensor& t : inputs) ensure_materialized(t);

    if (op.view && inputs.size() == 1) {
      const TensorImpl& in = inputs[0].impl();
      if (auto layout = op.view(ir::Layout{in.shape, in.strides, in.offset}, attrs)) {
        auto impl = std::make_shared<TensorImpl>(in);
        impl->dtype = out_types[0].dtype;
        impl->shape = layout->shape;
        impl->strides = layout->strides;
        impl->offset = layout->offset;
        return {Tensor(std::move(impl))};
      }
    }

    const Kernel* kernel = find_kernel(device.kind, op.name);
    if (!kernel) {
      KILN_CHECK(op.fusion != ir::FusionClass::collective || op.composite, "collective '",
                 op.name, "' has no kernel on ", to_string(device),
                 ": this device's process-group backend is not built in this kiln");
      KILN_CHECK(op.composite, "op '", op.name, "' has no kernel on ", to_string(device),
                 " and no composite to fall back on");
      CompositeCall call{inputs, attrs, {}};
      op.composite(call);
      for (size_t i = 0; i < out_types.size(); ++i)
        KILN_CHECK(i < call.outputs.size() && call.outputs[i].type() == out_types[i],
                   "composite of op '", op.name, "' returned the wrong type for output ", i);
      return std::move(call.outputs);
    }

    std::vector<Tensor> args(inputs.begin(), inputs.end());
    if (!kernel->strided_inputs)
      for (Tensor& a : args)
        if (!a.is_contiguous()) a = a.contiguous();
    // What the task holds until it has run: its inputs, outputs and scratch.
    // The buffers the task keeps: its inputs', then its outputs'.
    std::vector<std::shared_ptr<Storage>> keep = storages(args);
    int64_t held = distinct_bytes(keep);
    // A wait's result is its first input's buffer, as in a program: no
    // buffer of its own, not even for a moment (the pool's peak would count it).
    const bool aliased =
        op.aliases_first_input && args[0].is_contiguous() && args[0].type() == out_types[0];
    for (size_t k = aliased ? 1 : 0; k < out_types.size(); ++k)
      held += out_types[k].shape.numel() * int64_t(itemsize(out_types[k].dtype));
    if (kernel->scratch_bytes) {
      std::vector<ir::TypeInfo> types;
      for (const Tensor& a : args) types.push_back(a.type());
      held += kernel->scratch_bytes(PrepareArgs{types, attrs, op, device});
    }
    DeviceQueue& queue = backend(device).queue(device.index);
    queue.make_room(held);  // before the outputs are allocated
    std::vector<Tensor> outs;
    for (size_t k = 0; k < out_types.size(); ++k)
      outs.push_back(k == 0 && aliased ? Tensor(std::make_shared<TensorImpl>(args[0].impl()))
                                       : new_tensor(out_types[k], device,
                                                    ir::output_offloaded(op, attrs, k) ? Pool::offload
                                                                                       : Pool::device));
    for (const Tensor& t : outs) keep.push_back(t.impl().storage);

    std::string label = describe(op);
    auto task = [kernel, &op, attrs, device, ins = refs(args), out_refs = refs(outs),
                 keep = std::move(keep)] {
      bool empty = true;
      for (const TensorRef& r : out_refs) empty = empty && r.numel() == 0;
      if (empty && !out_refs.empty()) return;
      launch(*kernel, KernelArgs{ins, out_refs, attrs, op, device});
    };
    run(device, std::move(task), label, held);
    if (debug_)
      for (size_t i = 0; i < outs.size(); ++i) check_finite(outs[i], i, label);
    return outs;
  }

  void assign(const Tensor& dst, const Tensor& src) override {
    ensure_materialized(src);
    ensure_materialized(dst);
    const TensorImpl& d = dst.impl();
    for (int i = 0; i < d.shape.size(); ++i)
      KILN_CHECK(d.strides[i] != 0 || d.shape[i] <= 1, "in-place write into an expanded view (",
                 ir::to_string(dst.type()), ", stride 0 on dimension ", i, "): several of its "
                 "elements are one element in memory, so the write is ambiguous; write into a "
                 "copy of it or into the tensor before it was expanded");
    // A source overlapping the destination would be read while written.
    Tensor value = src;
    if (src.impl().storage == d.storage) {
      EagerModeGuard mode(debug_ ? EagerMode::debug : EagerMode::strict);  // not a deferred copy
      value = apply1(KILN_OP("copy"), {src});
    }
    Device device = dst.device();
    Backend* b = &backend(device);
    run(device,
        [b, d = ref_of(dst), s = ref_of(value), keep = storages({dst, value})] {
          b->strided_copy(d, s);
        },
        "in-place write");
  }

  void materialize(const Tensor& t) override {
    fail("a ", ir::to_string(t.type()), " tensor from a traced function was used after the trace "
         "ended; only the traced function's returned results hold values");
  }

 private:
  static std::string describe(const ir::OpDef& op) {
    const std::string& pos = current_op_position();
    return cat("op '", op.name, "' (", pos.empty() ? cat("eager op #", t_eager_ops) : pos, ")");
  }
  static std::vector<TensorRef> refs(const std::vector<Tensor>& ts) {
    std::vector<TensorRef> r;
    for (const Tensor& t : ts) r.push_back(ref_of(t));
    return r;
  }
  static std::vector<std::shared_ptr<Storage>> storages(const std::vector<Tensor>& ts) {
    std::vector<std::shared_ptr<Storage>> s;
    for (const Tensor& t : ts) s.push_back(t.impl().storage);
    return s;
  }
  // Debug mode runs each op alone: the queue is drained before it and
  // synchronised after it (the device too), so a failure names this op.
  void run(Device device, std::function<void()> task, const std::string& label,
           int64_t held_bytes = 0) {
    DeviceQueue& queue = backend(device).queue(device.index);
    if (debug_) queue.synchronize();
    queue.enqueue(std::move(task), label, held_bytes);
    if (debug_) queue.synchronize();
  }

  bool debug_;
};

}  // namespace

Tensor new_tensor(const ir::TypeInfo& type, Device device, Pool pool) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = type.dtype;
  impl->shape = type.shape;
  impl->device = device;
  impl->strides = contiguous_strides(type.shape);
  impl->storage =
      std::make_shared<Storage>(device, size_t(type.shape.numel()) * itemsize(type.dtype), pool);
  return Tensor(std::move(impl));
}

Context& eager_context(EagerMode mode) {
  static EagerContext strict(false), debug(true);
  switch (mode) {
    case EagerMode::strict: return strict;
    case EagerMode::debug: return debug;
    case EagerMode::defer_and_fuse: return defer_context();
  }
  return strict;
}

}  // namespace kiln
