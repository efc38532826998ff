#include "kiln/autograd/grad.h"

#include <memory>
#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/compiler/dce.h"
#include "kiln/ir/region.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/graph_runner.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/region.h"
#include "kiln/runtime/rules.h"

namespace kiln {
namespace {

// Which values of a recording depend on the differentiated tensors: only
// their gradients are wanted. Grows with the graph (vjp rules and
// composites append nodes, which read only earlier values).
class Reach {
 public:
  Reach(const ir::Graph& g, const std::vector<ir::ValueId>& wrt) : graph_(g) {
    for (ir::ValueId v : wrt)
      if (v >= 0) mark(v);
  }
  bool operator()(ir::ValueId v) {
    const auto& nodes = graph_.nodes();
    for (; done_ < nodes.size(); ++done_)
      for (ir::ValueId in : nodes[done_].inputs)
        if (get(in)) {
          for (ir::ValueId out : nodes[done_].outputs) mark(out);
          break;
        }
    return get(v);
  }

 private:
  bool get(ir::ValueId v) const { return size_t(v) < on_.size() && on_[size_t(v)]; }
  void mark(ir::ValueId v) {
    if (on_.size() <= size_t(v)) on_.resize(size_t(v) + 1, false);
    on_[size_t(v)] = true;
  }
  const ir::Graph& graph_;
  std::vector<bool> on_;
  size_t done_ = 0;  // nodes propagated through
};

class Backprop {
 public:
  Backprop(Recording& rec, Device device, Reach& reach) : rec_(rec), device_(device), reach_(reach) {}

  void seed(ir::ValueId v, Tensor cot) {
    auto it = cot_.find(v);
    if (it == cot_.end()) cot_[v] = std::move(cot);
    else it->second = apply1(KILN_OP("add"), {it->second, cot});
  }
  Tensor cotangent(ir::ValueId v) const {
    auto it = cot_.find(v);
    return it == cot_.end() ? Tensor() : it->second;
  }

  // Propagates cotangents backwards through nodes [first, last).
  void run(size_t first, size_t last) {
    for (size_t i = last; i-- > first;) {
      // Copy what we need: vjp rules append nodes, which may move the vector.
      const ir::Node node = rec_.graph.nodes()[i];
      std::vector<Tensor> cots;
      bool any = false;
      for (ir::ValueId v : node.outputs) {
        cots.push_back(cotangent(v));
        any = any || cots.back().defined();
      }
      if (!any) continue;
      // Only floating inputs that depend on what is differentiated carry
      // gradients anyone asked for.
      auto wanted = std::make_unique<bool[]>(node.inputs.size());
      bool wants_any = false;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        ir::ValueId v = node.inputs[k];
        wanted[k] = is_floating(rec_.graph.type(v).dtype) && reach_(v);
        wants_any = wants_any || wanted[k];
      }
      if (!wants_any) continue;
      std::vector<Tensor> ins = tensors(node.inputs);
      std::vector<Tensor> outs = tensors(node.outputs);
      // The backward of a node belongs to its forward region's backward.
      RegionGuard region(node.region >= 0 ? ir::backward_region(rec_.graph.region_name(node.region))
                                          : std::string());
      if (node.op->vjp) {
        VjpCall call{ins, outs, cots, node.attrs, {}, {wanted.get(), node.inputs.size()}};
        call.grads.resize(ins.size());
        node.op->vjp(call);
        accumulate(node, call.grads);
      } else if (node.op->composite) {
        differentiate_composite(node, ins, cots);
      } else {
        fail("op '", node.op->name, "' has no vjp rule, so it cannot be differentiated (",
             ir::node_to_text(rec_.graph, node), ")");
      }
    }
  }

 private:
  std::vector<Tensor> tensors(const std::vector<ir::ValueId>& ids) {
    std::vector<Tensor> out;
    for (ir::ValueId v : ids) out.push_back(rec_.tensor(v, device_));
    return out;
  }

  void accumulate(const ir::Node& node, const std::vector<Tensor>& grads) {
    for (size_t k = 0; k < node.inputs.size() && k < grads.size(); ++k) {
      if (!grads[k].defined() || !reach_(node.inputs[k])) continue;
      ir::ValueId v = node.inputs[k];
      const ir::TypeInfo& want = rec_.graph.type(v);
      KILN_CHECK(grads[k].type() == want, "vjp rule of op '", node.op->name,
                 "' returned a gradient of type ", ir::to_string(grads[k].type()), " for input ",
                 k, " of type ", ir::to_string(want));
      if (!is_floating(want.dtype)) continue;
      auto it = cot_.find(v);
      if (it == cot_.end()) cot_[v] = grads[k];
      else it->second = apply1(KILN_OP("add"), {it->second, grads[k]});
    }
  }

  // Expands the composite after the current end of the graph, seeds its
  // outputs with the node's cotangents and propagates back to its inputs.
  void differentiate_composite(const ir::Node& node, const std::vector<Tensor>& ins,
                               const std::vector<Tensor>& cots) {
    size_t first = rec_.graph.nodes().size();
    CompositeCall call{ins, node.attrs, {}};
    node.op->composite(call);
    size_t last = rec_.graph.nodes().size();
    Backprop inner(rec_, device_, reach_);
    for (size_t k = 0; k < cots.size(); ++k)
      if (cots[k].defined()) inner.seed(rec_.value_of(call.outputs[k]), cots[k]);
    inner.run(first, last);
    std::vector<Tensor> grads;
    for (ir::ValueId v : node.inputs) grads.push_back(inner.cotangent(v));
    accumulate(node, grads);
  }

  Recording& rec_;
  Device device_;
  Reach& reach_;
  std::unordered_map<ir::ValueId, Tensor> cot_;
};

}  // namespace

std::vector<Tensor> append_vjp(Recording& rec, const std::vector<Tensor>& outputs,
                               const std::vector<Tensor>& cotangents, const std::vector<Tensor>& wrt) {
  KILN_CHECK(outputs.size() == cotangents.size(), "append_vjp: ", outputs.size(), " outputs but ",
             cotangents.size(), " cotangents");
  Device device = outputs.empty() ? kCPU : outputs[0].device();
  std::vector<ir::ValueId> wrt_values;  // -1 where w is not floating (no gradient)
  for (const Tensor& w : wrt) wrt_values.push_back(is_floating(w.dtype()) ? rec.value_of(w) : -1);
  Reach reach(rec.graph, wrt_values);
  Backprop bp(rec, device, reach);
  size_t end = rec.graph.nodes().size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!cotangents[i].defined()) continue;
    KILN_CHECK(cotangents[i].type() == outputs[i].type(), "append_vjp: cotangent ", i, " is ",
               ir::to_string(cotangents[i].type()), " for an output of type ",
               ir::to_string(outputs[i].type()));
    bp.seed(rec.value_of(outputs[i]), cotangents[i]);
  }
  bp.run(0, end);
  std::vector<Tensor> grads;
  for (const Tensor& w : wrt) {
    if (!is_floating(w.dtype())) {
      grads.emplace_back();
      continue;
    }
    Tensor g = bp.cotangent(wrt_values[grads.size()]);
    grads.push_back(g.defined() ? g : zeros_like(w));
  }
  return grads;
}

std::vector<Tensor> append_backward(Recording& rec, const Tensor& loss, const std::vector<Tensor>& wrt) {
  KILN_CHECK(loss.numel() == 1 && is_floating(loss.dtype()),
             "the differentiated function's first result must be a floating scalar (the loss); "
             "got ", ir::to_string(loss.type()));
  return append_vjp(rec, {loss}, {ones_like(loss)}, wrt);
}

std::function<ValueAndGrad(const std::vector<Tensor>&)> value_and_grad(TensorFn fn,
                                                                       GradOptions options) {
  return [fn = std::move(fn), options = std::move(options)](const std::vector<Tensor>& args) {
    auto rec = Recording::create();
    std::vector<Tensor> placeholders;
    for (const Tensor& a : args) placeholders.push_back(rec->tensor(rec->capture(a), a.device()));
    std::vector<Tensor> values, grads;
    {
      ContextGuard trace(std::make_shared<TraceContext>(rec));
      values = fn(placeholders);
      KILN_CHECK(!values.empty(), "value_and_grad: the function returned no tensors; return the loss first");
      grads = append_backward(*rec, values[0], placeholders);
    }
    std::vector<ir::ValueId> outs;
    for (const Tensor& v : values) outs.push_back(rec->value_of(v));
    for (const Tensor& g : grads)
      if (g.defined()) outs.push_back(rec->value_of(g));
    rec->graph.set_outputs(outs);
    // Gradients of constants that rules computed beside the wanted ones
    // (a frozen weight's, next to its input's) would otherwise run in the
    // eager rungs, which execute the recording as it stands.
    rec->graph = compiler::dce(rec->graph);
    if (options.remat != compiler::RematPolicy::none)
      rec->graph = compiler::rematerialize(rec->graph, options.remat);
    // Inside an enclosing trace the regions are recorded, not compiled here.
    bool per_region = options.compile_regions && !dynamic_cast<TraceContext*>(&current_context());
    std::vector<Tensor> results =
        per_region ? run_graph_compiling_regions(rec->graph, rec->captured, "value_and_grad",
                                                 *options.compile_regions)
                   : run_graph(rec->graph, rec->captured, "value_and_grad");
    ValueAndGrad r;
    r.values.assign(results.begin(), results.begin() + values.size());
    size_t next = values.size();
    for (const Tensor& g : grads) r.grads.push_back(g.defined() ? results[next++] : Tensor());
    return r;
  };
}

}  // namespace kiln
