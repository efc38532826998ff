// Op declarations. Every op is declared once (in its family's file under
// kiln/ops) with its attribute schema, its shape/dtype rule, its cost, its
// fusion class and, where it has them, its vjp rule, its composite, its
// view rule and that view's inverse (view scatter). The registry is a table
// filled at static-initialisation time; nothing in kiln switches over op names.
#pragma once
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/ir/attrs.h"

namespace kiln {
// Defined by the runtime, which calls them with tensors; the IR only stores
// the rules.
struct VjpCall;
struct CompositeCall;
struct ViewScatterCall;
}  // namespace kiln

namespace kiln::ir {

struct TypeInfo {
  DType dtype = DType::f32;
  Shape shape;
  friend bool operator==(const TypeInfo&, const TypeInfo&) = default;
};
std::string to_string(const TypeInfo& t);  // "f32[2,3]"

enum class FusionClass { elementwise, reduction, view, opaque, collective };
const char* fusion_class_name(FusionClass c);

struct Cost {
  double flops = 0;
  double bytes = 0;
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;  // nullopt: required
};

// A strided view of a buffer, in elements.
struct Layout {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
};

using InferFn = std::function<std::vector<TypeInfo>(std::span<const TypeInfo>, const Attrs&)>;
using CostFn = std::function<Cost(std::span<const TypeInfo> in, std::span<const TypeInfo> out,
                                  const Attrs&)>;
using VjpFn = std::function<void(VjpCall&)>;
using CompositeFn = std::function<void(CompositeCall&)>;
// Returns the output layout when the op can be a view of its (single) input
// without copying, nullopt when it needs a copy (e.g. reshaping a transpose).
using ViewFn = std::function<std::optional<Layout>(const Layout&, const Attrs&)>;
// A view op's inverse: the input with the view's elements replaced, how a
// traced in-place write through the view becomes a functional update.
using ViewScatterFn = std::function<void(ViewScatterCall&)>;

struct OpDef {
  std::string name;
  int num_inputs = 1;  // -1: variadic
  std::vector<AttrSpec> attrs;
  InferFn infer;
  FusionClass fusion = FusionClass::opaque;
  CostFn cost;           // default: one flop per output element, bytes moved
  VjpFn vjp;             // empty: not differentiable
  CompositeFn composite; // the plain path a fused op is tested against
  ViewFn view;           // set for ops that eager modes run as metadata views
  ViewScatterFn view_scatter;  // with `view`: empty where writes through it are unsupported
  bool side_effects = false;  // collectives: never dropped, never reordered
  // A wait (collective_wait, transfer_wait): its one output is its first
  // input's buffer, completed. The memory plan gives both one slot.
  bool aliases_first_input = false;
  // Its one output is its first input's bytes, under another shape where
  // the input is dense, as every value of a program is (reshape, squeeze,
  // unsqueeze, optimization_barrier). The memory plan gives both one slot
  // where it can, and a program then runs nothing for the node.
  bool reinterprets_first_input = false;
  // Which of its outputs live in the device's offload pool (host memory),
  // not the device's: the memory plan gives them an arena of their own and
  // eager modes allocate them there (activation offload, compiler/remat.h).
  // Empty: none. Read it through output_offloaded().
  std::function<bool(const Attrs&, size_t output)> offloaded_output;

  // Checks `attrs` against the schema, fills defaults; throws naming the op.
  Attrs complete_attrs(const Attrs& attrs) const;
  // Runs the shape/dtype rule; an error names the op and its input types.
  std::vector<TypeInfo> infer_types(std::span<const TypeInfo> in, const Attrs& attrs) const;
  Cost cost_of(std::span<const TypeInfo> in, std::span<const TypeInfo> out,
               const Attrs& attrs) const;
};

// Whether output `k` of a node of `op` with `attrs` lives in the offload pool.
inline bool output_offloaded(const OpDef& op, const Attrs& attrs, size_t k) {
  return op.offloaded_output && op.offloaded_output(attrs, k);
}

// Registers `def`; a second op of the same name is a programming error.
const OpDef& register_op(OpDef def);
// Looks up an op; an unknown name is a kiln::Error naming the closest one.
const OpDef& get_op(std::string_view name);
const OpDef* find_op(std::string_view name);
std::vector<const OpDef*> all_ops();

}  // namespace kiln::ir
