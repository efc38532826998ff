// Module: a named tree of parameters, PyTorch style. A module registers its
// own parameters and its children; the dotted path of each parameter is its
// name (a model built for Hugging Face weights uses HF's names, e.g.
// "model.layers.0.self_attn.q_proj.weight").
//
// Parameters are Tensor members of the concrete module, registered by
// address, so a module is neither copyable nor movable. Forward code reads
// the members, so replacing them (ParameterScope) makes the same forward
// code run on other values: that is how value_and_grad differentiates a
// module, which is a function of its parameters.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/autograd/grad.h"
#include "kiln/ops/random.h"
#include "kiln/runtime/tensor.h"

namespace kiln::nn {

// How init_parameters fills a parameter (Hugging Face's _init_weights:
// weights normal(0, initializer_range), biases zero, norm weights one).
enum class Init { normal, zeros, ones };

using StateDict = std::map<std::string, Tensor>;

// A transformation a plan installs from outside at a fixed point of a
// module's forward (tensor parallelism, kiln/train/tensor_parallel.h,
// enters and leaves its regions this way); the module knows nothing of
// what it does. Empty: the identity.
using TensorHook = std::function<Tensor(const Tensor&)>;
inline Tensor apply_hook(const TensorHook& hook, const Tensor& x) { return hook ? hook(x) : x; }

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Every parameter of this module and its descendants, depth first in
  // registration order: own parameters, then each child's.
  std::vector<std::pair<std::string, Tensor*>> named_parameters();
  std::vector<std::pair<std::string, const Tensor*>> named_parameters() const;
  // The parameters' current values, in named_parameters() order.
  std::vector<Tensor> parameters() const;
  // Replaces every parameter, in named_parameters() order; each value must
  // have its parameter's shape and dtype (unless the parameter is unset, see
  // ParameterScope's allow_unset).
  void set_parameters(const std::vector<Tensor>& values, bool allow_unset = false);
  int64_t num_parameters() const;  // elements over all parameters

  // name -> value of every parameter (the tensors themselves, not copies).
  StateDict state_dict() const;
  // Copies each entry into the parameter of that name (converting dtype).
  // All problems are reported together in one kiln::Error: entries the
  // module lacks (unexpected), parameters the dict lacks (missing), and
  // shape mismatches. strict=false ignores missing and unexpected entries;
  // shapes are always checked. Nothing is written unless all checks pass.
  void load_state_dict(const StateDict& dict, bool strict = true);

  // Fills every parameter by its Init kind: normal draws (in
  // named_parameters() order) come from `g` with standard deviation `std`.
  void init_parameters(Generator& g, double std);

 protected:
  // `value` is stored into *slot, which must be a member of this module.
  void register_parameter(std::string name, Tensor* slot, Tensor value, Init init);
  // `child` must outlive this module's use (usually a member of it).
  void register_module(std::string name, Module* child);
  // How init_parameters fills this module's own parameter `name`.
  void set_init(const std::string& name, Init init);

 private:
  struct Param {
    std::string name;
    Tensor* slot;
    Init init;
  };
  template <class Visit>
  void visit(const std::string& prefix, Visit&& f) const;

  std::vector<Param> params_;
  std::vector<std::pair<std::string, Module*>> children_;
};

// Owns a list of modules named "0", "1", ... (HF's nn.ModuleList).
template <class M>
class ModuleList : public Module {
 public:
  M& push_back(std::unique_ptr<M> m) {
    M& ref = *m;
    register_module(std::to_string(items_.size()), &ref);
    items_.push_back(std::move(m));
    return ref;
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) { return *items_[i]; }
  const M& operator[](size_t i) const { return *items_[i]; }

 private:
  std::vector<std::unique_ptr<M>> items_;
};

// Replaces a module's parameters with `values` (named_parameters() order)
// for the scope's lifetime and puts the old ones back on exit, even on an
// exception. Used to run a module on traced parameter values. With
// `allow_unset`, an undefined value leaves its parameter unset in the scope
// (reading it is an error): parameters supplied another way, as the
// stacked layers of a scan (ForwardOptions::stacked_layers).
class ParameterScope {
 public:
  ParameterScope(Module& module, const std::vector<Tensor>& values, bool allow_unset = false);
  ~ParameterScope();
  ParameterScope(const ParameterScope&) = delete;
  ParameterScope& operator=(const ParameterScope&) = delete;

 private:
  Module& module_;
  std::vector<Tensor> saved_;
};

// kiln::value_and_grad over a module's parameters: `fn` computes the loss
// (values[0], a floating scalar) and any auxiliary values from the module
// as it stands; grads[i] is d loss / d parameter i in named_parameters()
// order. The module's parameters are unchanged afterwards.
ValueAndGrad value_and_grad(Module& module, const std::function<std::vector<Tensor>()>& fn);

}  // namespace kiln::nn
