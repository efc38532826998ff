#include "kiln/backend/cuda/fused/codegen.h"

#include <algorithm>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/codegen/expr.h"

namespace kiln::cuda::fused {
namespace {

namespace cg = kiln::codegen;
using cg::Family;
using cg::Instr;
using cg::Operand;
using cg::OperandRole;
using cg::Plan;
using cg::Reduction;

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of the reduction's accumulator (reduce_ops.h): sums of integers and
// bools count in i64, of floats in f32 (f64 for f64); max and min keep the
// compute type.
int acc_bytes(const Plan& p) {
  const cg::Scalar s = cg::scalar_of(p.graph.type(p.reduction->input).dtype);
  const bool sum = p.reduction->kind == cg::ReduceKind::sum || p.reduction->kind == cg::ReduceKind::mean;
  switch (s) {
    case cg::Scalar::f32: return 4;
    case cg::Scalar::f64: return 8;
    case cg::Scalar::i32: return sum ? 8 : 4;
    case cg::Scalar::i64: return 8;
    case cg::Scalar::b8: return 8;
  }
  return 8;
}

int result_count(const Plan& p) { return int(std::count(p.outputs.begin(), p.outputs.end(), -1)); }

class Emitter {
 public:
  Emitter(const Plan& p, const cg::Space& sp) : p_(p), sp_(sp), l_(launch_of(p)) {
    instr_of_.assign(p.graph.values().size(), -1);
    for (size_t i = 0; i < p.instrs.size(); ++i) instr_of_[p.instrs[i].out] = int(i);
  }

  std::string source() {
    os_ << cg::body_comment(p_, "kiln/backend/cuda/fused/codegen.cc") << embedded_headers() << "\n"
        << "struct KilnArgs {\n  char* data[" << pointer_count(p_) << "];\n  uint64_t constants["
        << std::max<size_t>(1, cg::full_constants(p_).size()) << "];\n};\n\n";
    if (p_.reduction) {
      reduction_prelude();
      if (p_.reduction->columns) fold_columns();
      else fold_rows();
      if (l_.chunks > 1) combine();
    } else {
      eval();
    }
    return os_.str();
  }

 private:
  std::string v(ir::ValueId id) const { return cg::value_name(id); }
  const char* ctype(ir::ValueId id) const { return cg::compute_type_name(p_.graph.type(id).dtype); }

  void signature(const char* symbol) {
    os_ << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") " << symbol
        << "(const KilnArgs a) {\n";
  }

  // Typed operand pointers (arange operands have none: their values are
  // computed in place) and the full constants, at the top of a kernel.
  void prologue() {
    for (size_t k = 0; k < p_.operands.size(); ++k) {
      const Operand& o = p_.operands[k];
      if (o.role == OperandRole::constant) continue;
      const char* ty = cg::storage_type_name(o.dtype);
      const char* c = o.role == OperandRole::output ? "" : "const ";
      os_ << "  " << c << ty << "* d" << k << " = reinterpret_cast<" << c << ty << "*>(a.data[" << k
          << "]);\n";
    }
    os_ << cg::full_declarations(p_, "a.constants", "  ");
  }

  // The statements evaluating flat position `pos` of the space: operand
  // offsets o<k>, the instructions, the elementwise outputs' stores, and
  // `also` (the reduced value) defined.
  void position(const std::string& in, const std::string& pos, ir::ValueId also) {
    const int m = sp_.shape.size();
    const size_t n = p_.operands.size();
    for (size_t k = 0; k < n; ++k) os_ << in << "int64_t o" << k << " = 0;\n";
    os_ << in << "{\n" << in << "  int64_t rest = " << pos << ";\n";
    for (int d = m - 1; d >= 0; --d) {
      if (d > 0)
        os_ << in << "  {\n" << in << "    const int64_t idx = rest % " << sp_.shape[d] << ";\n"
            << in << "    rest /= " << sp_.shape[d] << ";\n";
      else
        os_ << in << "  {\n" << in << "    const int64_t idx = rest;\n";
      for (size_t k = 0; k < n; ++k)
        if (sp_.strides[k][d] != 0) os_ << in << "    o" << k << " += idx * " << sp_.strides[k][d] << ";\n";
      os_ << in << "  }\n";
    }
    os_ << in << "}\n";
    std::vector<bool> defined(p_.graph.values().size(), false);
    auto need = [&](ir::ValueId id) {
      const int i = instr_of_[id];
      if (defined[size_t(id)] || (i >= 0 && p_.instrs[size_t(i)].family == Family::full)) return;
      defined[size_t(id)] = true;
      std::string value;
      if (i < 0) {
        const int k = p_.graph.values()[id].index;  // a body input: its operand
        value = cg::load(cat("d", k, "[o", k, "]"));
      } else {
        const Instr& ar = p_.instrs[size_t(i)];
        value = cg::arange_value(ar, cat("o", ar.operand));
      }
      os_ << in << "const " << ctype(id) << " " << v(id) << " = " << value << ";\n";
    };
    for (const Instr& ins : p_.instrs) {
      if (ins.family == Family::full || ins.family == Family::arange) continue;
      for (ir::ValueId u : ins.in) need(u);
      os_ << in << "const " << ctype(ins.out) << " " << v(ins.out) << " = " << cg::expression(ins) << ";\n";
      defined[size_t(ins.out)] = true;
    }
    for (size_t k = 0; k < n; ++k) {
      const Operand& o = p_.operands[k];
      if (o.role != OperandRole::output) continue;
      need(o.value);
      os_ << in << "d" << k << "[o" << k << "] = " << cg::store(o.dtype, v(o.value)) << ";\n";
    }
    if (also >= 0) need(also);
  }

  void eval() {
    signature(kEvalSymbol);
    if (p_.numel > 0) {  // an empty space launches nothing (and has sizes of 0)
      prologue();
      os_ << "  const int64_t step = int64_t(gridDim.x) * blockDim.x;\n"
          << "  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < " << p_.numel
          << "; i += step) {\n";
      position("    ", "i", -1);
      os_ << "  }\n";
    }
    os_ << "}\n";
  }

  // The fold operation, and kiln_finish: a result's accumulator, divided for
  // a mean, stored as the result dtype in every output holding it.
  void reduction_prelude() {
    const Reduction& r = *p_.reduction;
    os_ << "using Op = " << cg::reduce_op_type(p_) << ";\n"
        << "using Acc = decltype(Op{}.identity);\n\n"
        << "__device__ inline void kiln_finish(const KilnArgs& a, int64_t o, Acc acc) {\n";
    if (r.kind == cg::ReduceKind::mean) os_ << "  acc = acc / Acc(" << r.length << ");\n";
    const int first = int(p_.operands.size());
    const char* ty = cg::storage_type_name(r.dtype);
    for (int j = 0; j < result_count(p_); ++j)
      os_ << "  reinterpret_cast<" << ty << "*>(a.data[" << first + j << "])[o] = " << cg::store(r.dtype, "acc")
          << ";\n";
    os_ << "}\n\n";
  }

  std::string partials() const { return cat("reinterpret_cast<Acc*>(a.data[", pointer_count(p_) - 1, "])"); }

  // The fixed tree over threads `lane` = 0 .. width-1 of s[at(lane)]; the
  // result ends in lane 0.
  void tree(const std::string& lane, int width, const std::string& at0, const std::string& step) {
    os_ << "  for (int w = " << width / 2 << "; w > 0; w /= 2) {\n"
        << "    __syncthreads();\n"
        << "    if (" << lane << " < w) s[" << at0 << "] = op.combine(s[" << at0 << "], s[" << at0
        << " + w * " << step << "]);\n"
        << "  }\n  __syncthreads();\n";
  }

  // Stores a folded item: the result when there is one chunk, else its partial.
  std::string keep(const std::string& result, const std::string& value) const {
    if (l_.chunks == 1) return cat("kiln_finish(a, ", result, ", ", value, ");");
    return cat(partials(), "[", result, " * ", l_.chunks, " + c] = ", value, ";");
  }

  void fold_start() {
    signature(kFoldSymbol);
    os_ << "  __shared__ Acc s[" << kThreads << "];\n";
    prologue();
    os_ << "  const Op op{};\n  const int x = threadIdx.x, y = threadIdx.y;\n";
  }

  // The row walk: thread (x, y) of a block folds elements x, x + block_x, ...
  // of chunk c of result o, item o * chunks + c = blockIdx.x * block_y + y.
  void fold_rows() {
    const Reduction& r = *p_.reduction;
    const int bx = l_.block_x;
    const int64_t items = r.results * l_.chunks;
    fold_start();
    os_ << "  const int64_t item = int64_t(blockIdx.x) * " << l_.block_y << " + y;\n"
        << "  const int64_t o = item / " << l_.chunks << ", c = item % " << l_.chunks << ";\n"
        << "  Acc acc = op.identity;\n";
    if (p_.numel > 0) {
      os_ << "  if (item < " << items << ") {\n"
          << "    const int64_t r_end = " << r.length << " < (c + 1) * " << kChunk << " ? " << r.length
          << " : (c + 1) * " << kChunk << ";\n"
          << "    for (int64_t r = c * " << kChunk << " + x; r < r_end; r += " << bx << ") {\n";
      position("      ", cat("o * ", r.length, " + r"), r.input);
      os_ << "      acc = op.combine(acc, op.load(" << v(r.input) << ", o));\n    }\n  }\n";
    }
    os_ << "  s[y * " << bx << " + x] = acc;\n";
    tree("x", bx, cat("y * ", bx, " + x"), "1");
    os_ << "  if (x == 0 && item < " << items << ") " << keep("o", cat("s[y * ", bx, "]")) << "\n}\n\n";
  }

  // The column walk: block blockIdx.x is chunk c of the tile of 32
  // neighbouring results starting at b0 in result row q; thread (x, y)
  // folds rows y, y + block_y, ... of result column b0 + x.
  void fold_columns() {
    const Reduction& r = *p_.reduction;
    const int64_t n0 = r.columns, tiles = ceil_div(n0, l_.block_x);
    const int by = l_.block_y;
    fold_start();
    os_ << "  const int64_t item = blockIdx.x;\n"
        << "  const int64_t c = item % " << l_.chunks << ", t = item / " << l_.chunks << " % " << tiles
        << ", q = item / " << l_.chunks * tiles << ";\n"
        << "  const int64_t b = t * " << l_.block_x << " + x, o = q * " << n0 << " + b;\n"
        << "  Acc acc = op.identity;\n";
    if (p_.numel > 0) {
      os_ << "  if (b < " << n0 << ") {\n"
          << "    const int64_t r_end = " << r.length << " < (c + 1) * " << kChunk << " ? " << r.length
          << " : (c + 1) * " << kChunk << ";\n"
          << "    for (int64_t r = c * " << kChunk << " + y; r < r_end; r += " << by << ") {\n";
      position("      ", cat("(q * ", r.length, " + r) * ", n0, " + b"), r.input);
      os_ << "      acc = op.combine(acc, op.load(" << v(r.input) << ", o));\n    }\n  }\n";
    }
    os_ << "  s[y * " << l_.block_x << " + x] = acc;\n";
    tree("y", by, cat("y * ", l_.block_x, " + x"), std::to_string(l_.block_x));
    os_ << "  if (y == 0 && b < " << n0 << ") " << keep("o", "s[x]") << "\n}\n\n";
  }

  // Pass 2: thread (x, y) folds partials x, x + block2_x, ... of result
  // o = blockIdx.x * block2_y + y, then the tree over x.
  void combine() {
    const Reduction& r = *p_.reduction;
    const int bx = l_.block2_x;
    signature(kCombineSymbol);
    os_ << "  __shared__ Acc s[" << kThreads << "];\n"
        << "  const Op op{};\n  const int x = threadIdx.x, y = threadIdx.y;\n"
        << "  const Acc* partial = " << partials() << ";\n"
        << "  const int64_t o = int64_t(blockIdx.x) * " << l_.block2_y << " + y;\n"
        << "  Acc acc = op.identity;\n"
        << "  if (o < " << r.results << ")\n"
        << "    for (int64_t c = x; c < " << l_.chunks << "; c += " << bx << ") acc = op.combine(acc, partial[o * "
        << l_.chunks << " + c]);\n"
        << "  s[y * " << bx << " + x] = acc;\n";
    tree("x", bx, cat("y * ", bx, " + x"), "1");
    os_ << "  if (x == 0 && o < " << r.results << ") kiln_finish(a, o, s[y * " << bx << "]);\n}\n";
  }

  const Plan& p_;
  const cg::Space& sp_;
  const Launch l_;
  std::vector<int> instr_of_;  // per value: its instruction, -1 for body inputs
  std::ostringstream os_;
};

}  // namespace

Launch launch_of(const Plan& p) {
  Launch l;
  if (!p.reduction) {
    l.positions = p.numel;
    return l;
  }
  const Reduction& r = *p.reduction;
  l.chunks = r.length > kChunk ? ceil_div(r.length, kChunk) : 1;
  l.acc_bytes = acc_bytes(p);
  if (r.columns) {
    l.block_x = 32;
    l.block_y = kThreads / 32;
    l.blocks = r.results / r.columns * ceil_div(r.columns, 32) * l.chunks;
  } else {
    const int64_t per_item = std::min(r.length, kChunk);
    l.block_x = int(std::min<int64_t>(kThreads, pow2_at_least(per_item)));
    l.block_y = kThreads / l.block_x;
    l.blocks = ceil_div(r.results * l.chunks, l.block_y);
  }
  if (l.chunks > 1) {
    l.block2_x = int(std::min<int64_t>(kThreads, pow2_at_least(l.chunks)));
    l.block2_y = kThreads / l.block2_x;
    l.blocks2 = ceil_div(r.results, l.block2_y);
  }
  return l;
}

int pointer_count(const Plan& p) {
  return int(p.operands.size()) + (p.reduction ? result_count(p) + 1 : 0);
}

std::string generate_source(const Plan& plan, const cg::Space& space) {
  KILN_CHECK(space.strides.size() == plan.operands.size(), "CUDA fused kernel: a layout of ",
             space.strides.size(), " operands for a body with ", plan.operands.size());
  return Emitter(plan, space).source();
}

}  // namespace kiln::cuda::fused
