// Runs a fused kernel's iteration space in parallel, whatever evaluates it
// (the interpreter or generated code), so both split work, fold chunks and
// write results the same way.
//
// Elementwise bodies: eval(begin, end) computes and stores positions
// [begin, end) of the Binding's space; ranges are independent.
// Reduction bodies: fold(item_begin, item_end, dst, op) evaluates the
// positions of work items [item_begin, item_end) (Reduction::items(), per
// the plan's walk), storing any elementwise outputs, and writes the chunk
// result (fold.h order) of result o, chunk c to dst[o * chunks + c]. The
// chunk results are then combined in chunk order and written as the result
// dtype, exactly as the eager reduction kernels do.
#pragma once
#include <algorithm>
#include <array>
#include <vector>

#include "kiln/backend/cpu/fold.h"
#include "kiln/backend/cpu/fused/plan.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/backend/cpu/reduction_engine.h"
#include "kiln/base/error.h"

namespace kiln::cpu::fused {

// Calls f(Op{}) with the fold.h operation of the plan's reduction, for the
// reduction input's compute type.
template <class F>
void visit_reduce_op(const Reduction& r, DType input, F&& f) {
  visit_scalar(scalar_of(input), [&](auto tag) {
    using C = decltype(tag);
    switch (r.kind) {
      case ReduceKind::sum:
      case ReduceKind::mean: return f(SumOp<C, sum_acc_t<C>>{});
      case ReduceKind::max:
      case ReduceKind::min:
        // The shape rules admit no bool max/min (nor does the eager kernel).
        if constexpr (std::is_same_v<C, bool>) fail("fused kernel: max/min of bool values");
        else if (r.kind == ReduceKind::max) return f(ExtremumOp<C, true>{});
        else return f(ExtremumOp<C, false>{});
    }
  });
}

template <class Eval, class Fold>
void execute(const Plan& p, const Binding& b, Eval&& eval, Fold&& fold) {
  if (!p.reduction) {
    parallel_for(p.numel, 1, [&](int64_t begin, int64_t end) { eval(begin, end); });
    return;
  }
  const Reduction& r = *p.reduction;
  visit_reduce_op(r, p.graph.type(r.input).dtype, [&](auto op) {
    using Op = decltype(op);
    using Acc = std::remove_cv_t<decltype(op.identity)>;
    std::vector<Acc> chunk_results(static_cast<size_t>(r.results * chunks(r)));
    if (r.length == 0) {
      // Nothing to fold: each result is the fold of identity lanes.
      std::array<Acc, kLanes> lanes;
      lanes.fill(op.identity);
      fold_lanes(op, lanes.data());
      std::fill(chunk_results.begin(), chunk_results.end(), lanes[0]);
    } else {
      const int64_t work = std::min(r.length, kChunk) * (r.columns ? std::min(r.columns, kTile) : 1);
      parallel_for(items(r), work, [&](int64_t ib, int64_t ie) {
        fold(ib, ie, chunk_results.data(), static_cast<const Op&>(op));
      });
    }
    const Acc count = Acc(r.length);
    const bool mean = r.kind == ReduceKind::mean;
    for (const TensorRef* out : b.results)
      write_results(*out, [&](int64_t o) {
        Acc acc = combine_chunks(op, chunk_results.data() + o * chunks(r), chunks(r));
        return mean ? acc / count : acc;
      });
  });
}

}  // namespace kiln::cpu::fused
