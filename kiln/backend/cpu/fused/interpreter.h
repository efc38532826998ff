// The fused-kernel interpreter: runs a Plan block by block. Each block of up
// to kBlock positions loads the inputs it needs into small cache-resident
// temporaries (in compute types: float for f32/bf16/f16, double for f64),
// runs every body node over the block with the functors of
// codegen/elementwise_ops.h, rounds results to 16-bit outputs as a stored tensor
// would be, and stores the outputs or folds the reduction (fold.h order).
// Results are therefore bit-identical to running the body's nodes one by one
// with the eager kernels. It runs any body the planner accepts, on any input
// layout; it is what a fused node runs until generated code is ready.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/backend/cpu/fused/plan.h"

namespace kiln::cpu::fused {

class Interpreter {
 public:
  static constexpr int64_t kBlock = 1024;  // a multiple of kLanes

  // Keeps a reference to `plan`, which must outlive the interpreter.
  explicit Interpreter(const Plan& plan);
  void run(const Binding& b) const;

  struct Frame;
  struct Step {
    void (*fn)(const Step&, Frame&, int64_t n) = nullptr;
    int out = -1;            // slot written
    int in[3] = {-1, -1, -1};  // slots read
    int operand = -1;        // load/store: the operand
  };

 private:
  // Fills a frame's temporaries for positions [begin, end), stores outputs.
  void eval_block(Frame& f, int64_t begin, int64_t end) const;
  void eval_range(Frame& f, int64_t begin, int64_t end) const;
  // Runs the steps over the frame's runs (n positions in all).
  void run_steps(Frame& f, int64_t n) const;
  // The reduction walks of plan.h: fold items into dst (driver.h's contract).
  template <class Acc, class Op>
  void fold_rows(Frame& f, int64_t item_begin, int64_t item_end, Acc* dst, const Op& op) const;
  template <class Acc, class Op>
  void fold_columns(Frame& f, int64_t item_begin, int64_t item_end, Acc* dst, const Op& op) const;

  const Plan& plan_;
  std::vector<Step> steps_;
  int slots_ = 0;
  struct Constant {
    int slot;
    Scalar type;
    uint64_t bits;
  };
  std::vector<Constant> constants_;  // full values: their slots are filled once per frame
  int reduced_slot_ = -1;  // the slot holding the reduction's input
};

}  // namespace kiln::cpu::fused
