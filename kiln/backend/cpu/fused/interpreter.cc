#include "kiln/backend/cpu/fused/interpreter.h"

#include <array>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "kiln/backend/cpu/fold.h"
#include "kiln/backend/cpu/fused/driver.h"
#include "kiln/backend/cpu/scalar.h"
#include "kiln/base/error.h"
#include "kiln/codegen/elementwise_ops.h"

namespace kiln::cpu::fused {

// One thread's temporaries (kBlock values per slot) and the runs of the
// block being evaluated: stretches of consecutive positions along the
// space's innermost dim, with each operand's element offset.
struct Interpreter::Frame {
  const Binding& b;
  std::unique_ptr<std::byte[]> temps;
  std::vector<void*> slots;
  std::vector<int64_t> inner;  // per operand: stride along the innermost dim
  int runs = 0;
  std::vector<int64_t> pos, len, offsets;  // per run; offsets per run and operand

  Frame(const Binding& binding, int slots_count)
      : b(binding), temps(new std::byte[size_t(slots_count) * kBlock * 8 + 64]) {
    // 64-byte aligned slots of kBlock values of up to 8 bytes.
    auto base = reinterpret_cast<uintptr_t>(temps.get());
    base = (base + 63) & ~uintptr_t(63);
    for (int s = 0; s < slots_count; ++s)
      slots.push_back(reinterpret_cast<void*>(base + uintptr_t(s) * kBlock * 8));
    for (const Strides& st : b.space.strides) inner.push_back(st.back());
    pos.resize(kBlock);
    len.resize(kBlock);
    offsets.resize(size_t(kBlock) * b.space.strides.size());
  }
  template <class C> C* slot(int s) const { return static_cast<C*>(slots[s]); }
  int64_t offset(int run, int operand) const { return offsets[size_t(run) * inner.size() + operand]; }

  // Appends positions [begin, end) to the block, as runs.
  void add_runs(int64_t begin, int64_t end) {
    const Shape& shape = b.space.shape;
    const int m = shape.size();
    const size_t ops = inner.size();
    const int64_t n0 = shape[m - 1];
    int64_t at = runs ? pos[runs - 1] + len[runs - 1] : 0;
    for (int64_t i = begin; i < end; ++runs) {
      int64_t col = i % n0, rest = i / n0;
      int64_t* off = &offsets[size_t(runs) * ops];
      for (size_t k = 0; k < ops; ++k) off[k] = col * inner[k];
      for (int d = m - 2; d >= 0 && rest > 0; --d) {
        int64_t idx = rest % shape[d];
        rest /= shape[d];
        for (size_t k = 0; k < ops; ++k) off[k] += idx * b.space.strides[k][d];
      }
      pos[runs] = at;
      len[runs] = std::min(n0 - col, end - i);
      i += len[runs];
      at += len[runs];
    }
  }
};

namespace {

using namespace codegen;  // the functors
using Step = Interpreter::Step;
using Frame = Interpreter::Frame;
using StepFn = void (*)(const Step&, Frame&, int64_t);

template <class T>
void load_fn(const Step& s, Frame& f, int64_t) {
  using C = compute_t<T>;
  C* dst = f.slot<C>(s.out);
  const T* base = reinterpret_cast<const T*>(f.b.data[s.operand]);
  const int64_t st = f.inner[s.operand];
  for (int r = 0; r < f.runs; ++r) {
    const T* p = base + f.offset(r, s.operand);
    C* d = dst + f.pos[r];
    const int64_t n = f.len[r];
    if (st == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = widen(p[i]);
    } else if (st == 0) {
      const C v = widen(p[0]);
      for (int64_t i = 0; i < n; ++i) d[i] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = widen(p[i * st]);
    }
  }
}

template <class T>
void store_fn(const Step& s, Frame& f, int64_t) {
  using C = compute_t<T>;
  const C* src = f.slot<C>(s.in[0]);
  T* base = reinterpret_cast<T*>(f.b.data[s.operand]);
  const int64_t st = f.inner[s.operand];
  for (int r = 0; r < f.runs; ++r) {
    T* p = base + f.offset(r, s.operand);
    const C* v = src + f.pos[r];
    const int64_t n = f.len[r];
    if (st == 1) {
      for (int64_t i = 0; i < n; ++i) p[i] = narrow<T>(v[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i * st] = narrow<T>(v[i]);
    }
  }
}

template <class F, class C, class R>
void unary_fn(const Step& s, Frame& f, int64_t n) {
  const C* x = f.slot<C>(s.in[0]);
  R* o = f.slot<R>(s.out);
  for (int64_t i = 0; i < n; ++i) o[i] = F{}(x[i]);
}

template <class F, class C, class R>
void binary_fn(const Step& s, Frame& f, int64_t n) {
  const C* x = f.slot<C>(s.in[0]);
  const C* y = f.slot<C>(s.in[1]);
  R* o = f.slot<R>(s.out);
  for (int64_t i = 0; i < n; ++i) o[i] = F{}(x[i], y[i]);
}

template <class C>
void where_fn(const Step& s, Frame& f, int64_t n) {
  const bool* c = f.slot<bool>(s.in[0]);
  const C* x = f.slot<C>(s.in[1]);
  const C* y = f.slot<C>(s.in[2]);
  C* o = f.slot<C>(s.out);
  for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
}

// What storing as O and loading back gives, as the eager cast kernel does.
template <class I, class O>
void cast_fn(const Step& s, Frame& f, int64_t n) {
  const compute_t<I>* x = f.slot<compute_t<I>>(s.in[0]);
  compute_t<O>* o = f.slot<compute_t<O>>(s.out);
  for (int64_t i = 0; i < n; ++i) o[i] = round_to<O>(x[i]);
}

template <class C>
void copy_fn(const Step& s, Frame& f, int64_t n) {
  std::memcpy(f.slot<C>(s.out), f.slot<C>(s.in[0]), size_t(n) * sizeof(C));
}

// Rounds a float slot to a 16-bit type in place.
template <class T>
void round_fn(const Step& s, Frame& f, int64_t n) {
  float* o = f.slot<float>(s.out);
  for (int64_t i = 0; i < n; ++i) o[i] = round_to<T>(o[i]);
}

// Which compute types an op family takes.
enum class Types { floating, numeric, boolean, any };
template <Types K, class C>
constexpr bool admits() {
  if constexpr (K == Types::floating) return std::is_floating_point_v<C>;
  else if constexpr (K == Types::numeric) return !std::is_same_v<C, bool>;
  else if constexpr (K == Types::boolean) return std::is_same_v<C, bool>;
  else return true;
}

template <class F, Types K, bool kBoolResult>
StepFn unary(Scalar s) {
  return visit_scalar(s, [](auto tag) -> StepFn {
    using C = decltype(tag);
    using R = std::conditional_t<kBoolResult, bool, C>;
    if constexpr (admits<K, C>()) return unary_fn<F, C, R>;
    else return nullptr;
  });
}

template <class F, Types K, bool kBoolResult>
StepFn binary(Scalar s) {
  return visit_scalar(s, [](auto tag) -> StepFn {
    using C = decltype(tag);
    using R = std::conditional_t<kBoolResult, bool, C>;
    if constexpr (admits<K, C>()) return binary_fn<F, C, R>;
    else return nullptr;
  });
}

using Maker = StepFn (*)(Scalar);

// The functor ops: name -> step for a compute type (of input 0).
const std::unordered_map<std::string, Maker>& functor_steps() {
#define KILN_NUMERIC_UNARY(op, F) {#op, unary<F, Types::numeric, false>},
#define KILN_FLOAT_UNARY(op, F) {#op, unary<F, Types::floating, false>},
#define KILN_LOGICAL_UNARY(op, F) {#op, unary<F, Types::boolean, false>},
#define KILN_NUMERIC_BINARY(op, F) {#op, binary<F, Types::numeric, false>},
#define KILN_FLOAT_BINARY(op, F) {#op, binary<F, Types::floating, false>},
#define KILN_COMPARE(op, F) {#op, binary<F, Types::any, true>},
#define KILN_LOGICAL_BINARY(op, F) {#op, binary<F, Types::boolean, false>},
  static const std::unordered_map<std::string, Maker> table = {
      KILN_NUMERIC_UNARY_OPS(KILN_NUMERIC_UNARY)
      KILN_FLOAT_UNARY_OPS(KILN_FLOAT_UNARY)
      KILN_LOGICAL_UNARY_OPS(KILN_LOGICAL_UNARY)
      KILN_NUMERIC_BINARY_OPS(KILN_NUMERIC_BINARY)
      KILN_FLOAT_BINARY_OPS(KILN_FLOAT_BINARY)
      KILN_COMPARE_OPS(KILN_COMPARE)
      KILN_LOGICAL_BINARY_OPS(KILN_LOGICAL_BINARY)
      {"gelu_erf", unary<GeluErf, Types::floating, false>},
      {"gelu_tanh", unary<GeluTanh, Types::floating, false>},
  };
  return table;
}

StepFn compute_step(const Instr& in) {
  const Scalar s = scalar_of(in.in_dtype);
  switch (in.family) {
    case Family::where:
      return visit_scalar(scalar_of(in.dtype), [](auto tag) -> StepFn { return where_fn<decltype(tag)>; });
    case Family::copy:
      return visit_scalar(s, [](auto tag) -> StepFn { return copy_fn<decltype(tag)>; });
    case Family::cast:
      return visit_dtype(in.in_dtype, [&](auto i) {
        return visit_dtype(in.dtype, [&](auto o) -> StepFn { return cast_fn<decltype(i), decltype(o)>; });
      });
    default: break;
  }
  std::string key = in.family == Family::gelu ? (in.functor == "GeluTanh" ? "gelu_tanh" : "gelu_erf")
                                              : in.op;
  auto it = functor_steps().find(key);
  StepFn fn = it == functor_steps().end() ? nullptr : it->second(s);
  KILN_CHECK(fn, "fused kernel: op '", in.op, "' has no CPU kernel for dtype ", dtype_name(in.in_dtype));
  return fn;
}

StepFn load_step(DType t) {
  return visit_dtype(t, [](auto tag) -> StepFn { return load_fn<decltype(tag)>; });
}
StepFn store_step(DType t) {
  return visit_dtype(t, [](auto tag) -> StepFn { return store_fn<decltype(tag)>; });
}
StepFn round_step(DType t) {
  return t == DType::bf16 ? round_fn<bf16> : round_fn<f16>;
}

}  // namespace

Interpreter::Interpreter(const Plan& plan) : plan_(plan) {
  const ir::Graph& g = plan.graph;
  const auto& instrs = plan.instrs;
  const int kForever = int(instrs.size());
  // Where each value is last read (an instruction index; -1: never).
  std::vector<int> last_use(g.values().size(), -1);
  for (size_t i = 0; i < instrs.size(); ++i)
    for (ir::ValueId v : instrs[i].in) last_use[v] = int(i);
  // Outputs are stored after the last instruction, so every input element
  // of a block is loaded before any output element is written: an output
  // may then reuse an input's buffer (memory_plan.h, in-place donation).
  for (const Operand& o : plan.operands)
    if (o.role == OperandRole::output) last_use[o.value] = kForever;
  if (plan.reduction) last_use[plan.reduction->input] = kForever;

  std::vector<int> slot_of(g.values().size(), -1);
  std::vector<bool> constant(g.values().size(), false);
  std::vector<int> free;
  auto alloc = [&] {
    if (free.empty()) return slots_++;
    int s = free.back();
    free.pop_back();
    return s;
  };
  // Values read from operands: body inputs (loaded on first use).
  std::vector<int> operand_of(g.values().size(), -1);
  for (int k = 0; k < plan.inputs; ++k) operand_of[plan.operands[k].value] = k;
  auto ensure_loaded = [&](ir::ValueId v) {
    if (slot_of[v] >= 0) return;
    slot_of[v] = alloc();
    Step st{.fn = load_step(g.type(v).dtype), .out = slot_of[v], .operand = operand_of[v]};
    steps_.push_back(st);
  };
  auto store_outputs = [&](ir::ValueId v) {
    for (size_t k = 0; k < plan.operands.size(); ++k) {
      const Operand& o = plan.operands[k];
      if (o.role != OperandRole::output || o.value != v) continue;
      steps_.push_back({.fn = store_step(o.dtype), .in = {slot_of[v], -1, -1}, .operand = int(k)});
    }
  };

  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    for (ir::ValueId v : in.in) ensure_loaded(v);
    if (in.family == Family::full) {
      slot_of[in.out] = slots_++;  // never freed: filled once per frame
      constant[in.out] = true;
      constants_.push_back({slot_of[in.out], scalar_of(in.dtype), in.constant});
    } else if (in.family == Family::arange) {
      slot_of[in.out] = alloc();
      steps_.push_back({.fn = load_step(in.dtype), .out = slot_of[in.out], .operand = in.operand});
    } else {
      Step st{.fn = compute_step(in), .out = alloc()};
      for (size_t k = 0; k < in.in.size(); ++k) st.in[k] = slot_of[in.in[k]];
      steps_.push_back(st);
      slot_of[in.out] = st.out;
      if (in.round) steps_.push_back({.fn = round_step(in.dtype), .out = st.out});
    }
    // Free what is no longer read, after the output is allocated: a step
    // never writes a slot it reads (a cast changes the element size).
    for (ir::ValueId v : in.in)
      if (last_use[v] == int(i) && !constant[v] && slot_of[v] >= 0) {
        free.push_back(slot_of[v]);
        slot_of[v] = -1;  // a value read twice by one node is freed once
      }
  }
  for (const Instr& in : instrs) store_outputs(in.out);
  if (plan.reduction) {
    ensure_loaded(plan.reduction->input);
    reduced_slot_ = slot_of[plan.reduction->input];
  }
}

void Interpreter::eval_block(Frame& f, int64_t begin, int64_t end) const {
  f.runs = 0;
  f.add_runs(begin, end);
  run_steps(f, end - begin);
}

void Interpreter::run_steps(Frame& f, int64_t n) const {
  for (const Step& s : steps_) s.fn(s, f, n);
}

void Interpreter::eval_range(Frame& f, int64_t begin, int64_t end) const {
  for (int64_t b = begin; b < end; b += kBlock) eval_block(f, b, std::min(end, b + kBlock));
}

// The row walk: items [item_begin, item_end) cover consecutive positions;
// blocks of them are evaluated in turn and each item's stretch folded into
// the lanes.
template <class Acc, class Op>
void Interpreter::fold_rows(Frame& f, int64_t item_begin, int64_t item_end, Acc* dst,
                             const Op& op) const {
  using V = typename Op::Input;
  const Reduction& r = *plan_.reduction;
  auto start_of = [&](int64_t item) {
    return item / chunks(r) * r.length + item % chunks(r) * kChunk;
  };
  auto end_of = [&](int64_t item) {
    int64_t o = item / chunks(r), c = item % chunks(r);
    return o * r.length + std::min(r.length, (c + 1) * kChunk);
  };
  std::array<Acc, kLanes> lanes;
  lanes.fill(op.identity);
  int64_t item = item_begin;
  const int64_t end = end_of(item_end - 1);
  for (int64_t b = start_of(item_begin); b < end; b += kBlock) {
    const int64_t e = std::min(end, b + kBlock);
    eval_block(f, b, e);
    const V* values = f.slot<V>(reduced_slot_);
    for (int64_t p = b; p < e;) {
      const int64_t o = item / chunks(r), stop = std::min(e, end_of(item));
      const V* v = values + (p - b);
      fold_run(op, lanes.data(), stop - p, int((p - o * r.length) % kLanes),
               [&](int64_t i) { return op.load(v[i], o); });
      p = stop;
      if (p == end_of(item)) {
        fold_lanes(op, lanes.data());
        dst[item++] = lanes[0];
        lanes.fill(op.identity);
      }
    }
  }
}

// The column walk: an item is chunk c of a tile of neighbouring results;
// blocks of whole rows of the tile are evaluated in turn and each row folded
// into the lanes of its results (fold.h's order, as reduction_engine.h's column_block).
template <class Acc, class Op>
void Interpreter::fold_columns(Frame& f, int64_t item_begin, int64_t item_end, Acc* dst,
                               const Op& op) const {
  using V = typename Op::Input;
  const Reduction& r = *plan_.reduction;
  const int64_t n0 = r.columns, length = r.length;
  std::vector<Acc> lanes(size_t(kLanes * kTile));
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t c = item % chunks(r), t = item / chunks(r) % tiles(r), q = item / chunks(r) / tiles(r);
    const int64_t b0 = t * kTile, nb = std::min(kTile, n0 - b0), first = q * n0 + b0;
    std::fill(lanes.begin(), lanes.end(), op.identity);
    const int64_t rows = std::max<int64_t>(1, kBlock / nb), r_end = std::min(length, (c + 1) * kChunk);
    for (int64_t r0 = c * kChunk; r0 < r_end; r0 += rows) {
      const int64_t r1 = std::min(r_end, r0 + rows);
      auto start = [&](int64_t row) { return (q * length + row) * n0 + b0; };
      f.runs = 0;
      if (nb == n0) f.add_runs(start(r0), start(r1));  // whole rows: one stretch
      else
        for (int64_t row = r0; row < r1; ++row) f.add_runs(start(row), start(row) + nb);
      run_steps(f, (r1 - r0) * nb);
      const V* v = f.slot<V>(reduced_slot_);
      for (int64_t row = r0; row < r1; ++row, v += nb) {
        Acc* l = lanes.data() + (row % kLanes) * kTile;
        for (int64_t b = 0; b < nb; ++b) l[b] = op.combine(l[b], op.load(v[b], first + b));
      }
    }
    fold_lane_columns(op, lanes.data(), kTile, nb);
    for (int64_t b = 0; b < nb; ++b) dst[(first + b) * chunks(r) + c] = lanes[size_t(b)];
  }
}

void Interpreter::run(const Binding& b) const {
  auto frame = [&] {
    Frame f(b, slots_);
    for (const Constant& c : constants_)
      visit_scalar(c.type, [&](auto tag) {
        using C = decltype(tag);
        C v;
        std::memcpy(&v, &c.bits, sizeof(C));
        std::fill_n(f.slot<C>(c.slot), kBlock, v);
      });
    return f;
  };
  execute(
      plan_, b,
      [&](int64_t begin, int64_t end) {
        Frame f = frame();
        eval_range(f, begin, end);
      },
      [&](int64_t ib, int64_t ie, auto* dst, const auto& op) {
        Frame f = frame();
        if (plan_.reduction->columns) fold_columns(f, ib, ie, dst, op);
        else fold_rows(f, ib, ie, dst, op);
      });
}

}  // namespace kiln::cpu::fused
