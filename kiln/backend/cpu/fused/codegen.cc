#include "kiln/backend/cpu/fused/codegen.h"

#include <sstream>

#include "kiln/base/error.h"
#include "kiln/codegen/expr.h"

namespace kiln::cpu::fused {
namespace {

using codegen::compute_type_name;
using codegen::storage_type_name;

// Functors whose math calls the C library, which has no vector forms here:
// each gets a loop of its own so that the arithmetic around them still
// vectorises. (Only speed depends on this.)
constexpr std::string_view kLibraryCallFunctors[] = {
    "Exp", "Log", "Tanh", "Sigmoid", "Silu", "Sin", "Cos", "Erf", "GeluErf", "GeluTanh", "Pow"};

// The instructions computed per element, cut into segments: each call of a
// C library function (kLibraryCallFunctors) alone, the instructions between
// them together. With one segment every value lives in registers; with
// more, elements go in tiles of kTile and values read by a later segment
// pass through a small array (L1), so that the segments without calls
// vectorise. full values are function constants; body inputs and arange
// values are loaded by each segment that reads them ("free" values).
// Before each loop over a run's elements: element j reads its inputs at j
// (or one value for all, stride 0) and writes its outputs and tiles at j,
// so iterations never depend on each other, even where an output reuses an
// input's buffer (in-place donation). Without it GCC would vectorise only
// behind run-time overlap checks of every pair of operands, which it gives
// up on beyond 10 of them (an AdamW update has 27): `__restrict` on the
// pointers, locals rather than parameters, does not count for it.
constexpr const char* kIvdep = "#pragma GCC ivdep\n";

class Emitter {
 public:
  static constexpr int64_t kTile = 256;

  explicit Emitter(const Plan& p) : p_(p), sp_(p.natural) {
    const size_t values = p.graph.values().size();
    seg_of_.assign(values, -1);
    instr_of_.assign(values, -1);
    bool last_call = false;
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      const Instr& in = p.instrs[i];
      instr_of_[in.out] = int(i);
      if (in.family == Family::full || in.family == Family::arange) continue;
      bool call = false;
      for (std::string_view f : kLibraryCallFunctors) call = call || f == in.functor;
      if (segments_.empty() || call || last_call) segments_.emplace_back();
      last_call = call;
      segments_.back().push_back(i);
      seg_of_[in.out] = int(segments_.size()) - 1;
    }
    if (segments_.empty()) segments_.emplace_back();
    // Values a later segment (or the reduction's fold) reads from a tile.
    tiled_.assign(values, false);
    if (segments_.size() > 1) {
      for (const Instr& in : p.instrs)
        for (ir::ValueId u : in.in)
          if (seg_of_[u] >= 0 && seg_of_[u] < seg_of_[in.out]) tiled_[u] = true;
      if (p.reduction) tiled_[p.reduction->input] = true;
      // Outputs are all stored by the last segment (see home).
      for (const Operand& o : p.operands)
        if (o.role == OperandRole::output && seg_of_[o.value] >= 0 &&
            seg_of_[o.value] + 1 < int(segments_.size()))
          tiled_[o.value] = true;
    }
  }

  std::string source() {
    os_ << codegen::body_comment(p_, "kiln/backend/cpu/fused/codegen.cc") << embedded_headers() << "\n"
        << "#include <algorithm>\n#include <cstdint>\n\n";
    if (p_.reduction) fold_function();
    else eval_function();
    return os_.str();
  }

 private:
  bool tiled() const { return segments_.size() > 1; }
  std::string v(ir::ValueId id) const { return codegen::value_name(id); }
  std::string t(ir::ValueId id) const { return cat("t", id); }
  const char* ctype(ir::ValueId id) const { return compute_type_name(p_.graph.type(id).dtype); }
  // The segment that writes a value to its tile or its output: tiles where
  // it is computed (free values: the last segment, which the fold reads);
  // outputs always the last segment, after every segment of the tile has
  // loaded its inputs, so that an output may reuse an input's buffer
  // (memory_plan.h, in-place donation).
  int home(ir::ValueId id, bool for_output) const {
    if (for_output || seg_of_[id] < 0) return int(segments_.size()) - 1;
    return seg_of_[id];
  }

  // Typed operand pointers, the full constants and the tiles, at the top of
  // a function. bool operands are addressed as their bytes (0 or 1): GCC
  // vectorises no loop that loads a bool.
  void prologue() {
    for (size_t k = 0; k < p_.operands.size(); ++k) {
      const Operand& o = p_.operands[k];
      const char* ty = o.dtype == DType::b8 ? "uint8_t" : storage_type_name(o.dtype);
      bool out = o.role == OperandRole::output;
      os_ << "  " << (out ? "" : "const ") << ty << "* __restrict d" << k << " = reinterpret_cast<"
          << (out ? "" : "const ") << ty << "*>(data[" << k << "]);\n";
    }
    os_ << codegen::full_declarations(p_, "constants", "  ");
    for (size_t id = 0; id < tiled_.size(); ++id)
      if (tiled_[id]) os_ << "  " << ctype(ir::ValueId(id)) << " " << t(ir::ValueId(id)) << "[" << kTile << "];\n";
  }

  // Sets `col`, `n` and the operand offsets o<k> for the run starting at
  // flat position `pos` of the space and ending at most at `limit`.
  void run_offsets(const std::string& indent, const std::string& pos, const std::string& limit) {
    const int m = sp_.shape.size();
    const int64_t inner = sp_.shape[m - 1];
    os_ << indent << "const int64_t col = " << pos << " % " << inner << ";\n";
    if (m > 1) os_ << indent << "int64_t rest = " << pos << " / " << inner << ";\n";
    for (size_t k = 0; k < p_.operands.size(); ++k)
      os_ << indent << "int64_t o" << k << " = col * " << sp_.strides[k][m - 1] << ";\n";
    for (int d = m - 2; d >= 0; --d) {
      os_ << indent << "{\n" << indent << "  const int64_t idx = rest % " << sp_.shape[d] << ";\n"
          << indent << "  rest /= " << sp_.shape[d] << ";\n";
      for (size_t k = 0; k < p_.operands.size(); ++k)
        if (sp_.strides[k][d] != 0) os_ << indent << "  o" << k << " += idx * " << sp_.strides[k][d] << ";\n";
      os_ << indent << "}\n";
    }
    os_ << indent << "const int64_t n = std::min<int64_t>(" << inner << " - col, " << limit << ");\n";
  }

  // Element j of the run of operand k.
  std::string element(size_t k) const {
    int64_t s = sp_.strides[k].back();
    if (s == 0) return cat("d", k, "[o", k, "]");
    if (s == 1) return cat("d", k, "[o", k, " + j]");
    return cat("d", k, "[o", k, " + j * ", s, "]");
  }

  // The expression loading a free value (body input or arange).
  std::string load(ir::ValueId id) const {
    int k = instr_of_[id] >= 0 ? p_.instrs[size_t(instr_of_[id])].operand : p_.graph.values()[id].index;
    return codegen::load(element(size_t(k)));
  }

  // The statements of segment s for element j (tiles are indexed j - j0),
  // defining `also` too when it is not -1.
  void segment(const std::string& indent, int s, ir::ValueId also = -1) {
    const auto& instrs = segments_[size_t(s)];
    std::vector<bool> defined(tiled_.size(), false);
    auto need = [&](ir::ValueId id) {
      const bool constant = instr_of_[id] >= 0 && p_.instrs[size_t(instr_of_[id])].family == Family::full;
      if (defined[size_t(id)] || constant) return;
      defined[size_t(id)] = true;
      if (seg_of_[id] >= 0) os_ << indent << "const " << ctype(id) << " " << v(id) << " = " << t(id) << "[j - j0];\n";
      else os_ << indent << "const " << ctype(id) << " " << v(id) << " = " << load(id) << ";\n";
    };
    for (size_t i : instrs) {
      const Instr& in = p_.instrs[i];
      for (ir::ValueId u : in.in) need(u);
      os_ << indent << "const " << ctype(in.out) << " " << v(in.out) << " = " << codegen::expression(in) << ";\n";
      defined[size_t(in.out)] = true;
    }
    for (size_t id = 0; id < tiled_.size(); ++id)
      if (tiled_[id] && home(ir::ValueId(id), false) == s) {
        need(ir::ValueId(id));
        os_ << indent << t(ir::ValueId(id)) << "[j - j0] = " << v(ir::ValueId(id)) << ";\n";
      }
    for (size_t k = 0; k < p_.operands.size(); ++k) {
      const Operand& o = p_.operands[k];
      if (o.role != OperandRole::output || home(o.value, true) != s) continue;
      need(o.value);
      os_ << indent << element(k) << " = " << codegen::store(o.dtype, v(o.value)) << ";\n";
    }
    if (also >= 0) need(also);
  }

  // Every segment over elements [j0, j1) of the run, one loop each.
  void segment_loops(const std::string& indent) {
    for (size_t s = 0; s < segments_.size(); ++s) {
      os_ << indent << kIvdep << indent << "for (int64_t j = j0; j < j1; ++j) {\n";
      segment(indent + "  ", int(s));
      os_ << indent << "}\n";
    }
  }

  // Tiles of the run's n elements: `consume` emits what follows the segments.
  template <class F>
  void tiles(const std::string& indent, F consume) {
    os_ << indent << "for (int64_t j0 = 0; j0 < n; j0 += " << kTile << ") {\n"
        << indent << "  const int64_t j1 = std::min<int64_t>(n, j0 + " << kTile << ");\n";
    segment_loops(indent + "  ");
    consume(indent + "  ");
    os_ << indent << "}\n";
  }

  void signature(const char* symbol, const char* params) {
    os_ << "extern \"C\" __attribute__((visibility(\"default\"))) void " << symbol << "(" << params
        << ") {\n";
  }

  void eval_function() {
    signature(kEvalSymbol, "char* const* data, const uint64_t* constants, int64_t begin, int64_t end");
    if (p_.numel == 0) {  // never called; sizes of 0 would divide by zero below
      os_ << "}\n";
      return;
    }
    prologue();
    os_ << "  for (int64_t i = begin; i < end;) {\n";
    run_offsets("    ", "i", "end - i");
    if (tiled()) {
      tiles("    ", [](const std::string&) {});
    } else {
      os_ << "    " << kIvdep << "    for (int64_t j = 0; j < n; ++j) {\n";
      segment("      ", 0);
      os_ << "    }\n";
    }
    os_ << "    i += n;\n  }\n}\n";
  }

  void fold_function() {
    signature(kFoldSymbol, "char* const* data, const uint64_t* constants, int64_t item_begin, "
                           "int64_t item_end, void* dst_");
    os_ << "  using Op = " << codegen::reduce_op_type(p_) << ";\n"
        << "  using Acc = decltype(Op{}.identity);\n"
        << "  const Op op{};\n"
        << "  Acc* dst = static_cast<Acc*>(dst_);\n";
    if (p_.numel == 0) {  // never called; sizes of 0 would divide by zero below
      os_ << "}\n";
      return;
    }
    prologue();
    if (p_.reduction->columns) fold_columns();
    else fold_rows();
  }

  // The row walk (plan.h): an item is chunk c of result o.
  void fold_rows() {
    const Reduction& r = *p_.reduction;
    const ir::ValueId x = r.input;
    os_ << "  for (int64_t item = item_begin; item < item_end; ++item) {\n"
        << "    const int64_t o = item / " << chunks(r) << ", c = item % " << chunks(r) << ";\n"
        << "    Acc lanes[kiln::cpu::kLanes];\n"
        << "    for (int l = 0; l < kiln::cpu::kLanes; ++l) lanes[l] = op.identity;\n"
        << "    const int64_t r_end = std::min<int64_t>(" << r.length << ", (c + 1) * kiln::cpu::kChunk);\n"
        << "    for (int64_t r = c * kiln::cpu::kChunk; r < r_end;) {\n"
        << "      const int64_t i = o * " << r.length << " + r;\n";
    run_offsets("      ", "i", "r_end - r");
    if (tiled()) {
      tiles("      ", [&](const std::string& in) {
        os_ << in << "kiln::cpu::fold_run(op, lanes, j1 - j0, int((r + j0) % kiln::cpu::kLanes), "
            << "[&](int64_t j) -> Acc { return op.load(" << t(x) << "[j], o); });\n";
      });
    } else {
      os_ << "      kiln::cpu::fold_run(op, lanes, n, int(r % kiln::cpu::kLanes), [&](int64_t j) -> Acc {\n";
      segment("        ", 0, x);
      os_ << "        return op.load(" << v(x) << ", o);\n      });\n";
    }
    os_ << "      r += n;\n    }\n"
        << "    kiln::cpu::fold_lanes(op, lanes);\n"
        << "    dst[item] = lanes[0];\n  }\n}\n";
  }

  // The column walk (plan.h): an item is chunk c of a tile of neighbouring
  // results; each row of the tile folds into the lanes of its results
  // (fold.h's order, as reduction_engine.h's column_block), vectorised across them.
  void fold_columns() {
    const Reduction& r = *p_.reduction;
    const ir::ValueId x = r.input;
    const int64_t n0 = r.columns, tile = kTile;
    os_ << "  for (int64_t item = item_begin; item < item_end; ++item) {\n"
        << "    const int64_t c = item % " << chunks(r) << ", t = item / " << chunks(r) << " % "
        << fused::tiles(r) << ", q = item / " << chunks(r) * fused::tiles(r) << ";\n"
        << "    const int64_t b0 = t * " << tile << ", nb = std::min<int64_t>(" << tile << ", "
        << n0 << " - b0), first = q * " << n0 << " + b0;\n"
        << "    Acc lanes[kiln::cpu::kLanes * " << tile << "];  // lane l of result b at l * "
        << tile << " + b\n"
        << "    for (int l = 0; l < kiln::cpu::kLanes; ++l)\n"
        << "      for (int64_t b = 0; b < nb; ++b) lanes[l * " << tile << " + b] = op.identity;\n"
        << "    const int64_t r_end = std::min<int64_t>(" << r.length << ", (c + 1) * kiln::cpu::kChunk);\n"
        << "    for (int64_t r = c * kiln::cpu::kChunk; r < r_end; ++r) {\n"
        << "      const int64_t i = (q * " << r.length << " + r) * " << n0 << " + b0;\n";
    run_offsets("      ", "i", "nb");
    os_ << "      Acc* __restrict l = lanes + r % kiln::cpu::kLanes * " << tile << ";\n";
    if (tiled()) {
      tiles("      ", [&](const std::string& in) {
        os_ << in << kIvdep << in << "for (int64_t j = j0; j < j1; ++j) l[j] = op.combine(l[j], op.load(" << t(x)
            << "[j - j0], first + j));\n";
      });
    } else {
      os_ << "      " << kIvdep << "      for (int64_t j = 0; j < n; ++j) {\n";
      segment("        ", 0, x);
      os_ << "        l[j] = op.combine(l[j], op.load(" << v(x) << ", first + j));\n      }\n";
    }
    os_ << "    }\n"
        << "    kiln::cpu::fold_lane_columns(op, lanes, " << tile << ", nb);\n"
        << "    for (int64_t b = 0; b < nb; ++b) dst[(first + b) * " << chunks(r)
        << " + c] = lanes[b];\n"
        << "  }\n}\n";
  }

  const Plan& p_;
  const Space& sp_;
  std::vector<std::vector<size_t>> segments_;  // instruction indices
  std::vector<int> seg_of_;    // per value: its segment, -1 for free values
  std::vector<int> instr_of_;  // per value: its instruction, -1 for body inputs
  std::vector<bool> tiled_;    // per value: passes through a tile
  std::ostringstream os_;
};

}  // namespace

std::string generate_source(const Plan& plan) { return Emitter(plan).source(); }

}  // namespace kiln::cpu::fused
