#include "kiln/train/validation.h"

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/data/bounded_batch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln::train {

double validation_loss(const CausalLM& model, data::DataLoader& loader, const ValidationPass& p) {
  KILN_CHECK(p.steps == -1 || p.steps >= 1, "validation.steps must be -1 or >= 1, got ", p.steps);
  loader.reset();
  const int64_t local = p.local_batch_size, global = local * p.dp_degree;
  const bool whole = p.steps == -1;
  const int64_t batches = whole ? (loader.windows_per_epoch() + global - 1) / global : p.steps;
  const DType f64 = DType::f64;
  double loss = 0, targets = 0;  // the loss summed over the targets, and their number
  for (int64_t i = 0; i < batches; ++i) {
    data::Batch b;
    {
      profile::Span span("data", "next validation batch");
      b = whole ? data::epoch_batch(loader, i * global + p.dp_rank * local, local) : loader.next();
    }
    ForwardOptions fo;
    if (p.document_mask) fo.doc_ids = b.doc_ids, fo.positions = b.positions;
    Tensor ce = model.forward(b.ids, b.targets, fo).ce_loss.to(f64);
    Tensor n = sum(ne(b.targets, scalar(-100, DType::i64))).to(f64);
    // A rank whose rows are all padding has a mean over no targets (NaN): it adds 0.
    Tensor weighted = where(gt(n, scalar(0, f64)), ce * n, scalar(0, f64));
    std::vector<double> totals =
        p.sum_over_dp(concat({weighted.reshape({1}), n.reshape({1})})).to_vector<double>();
    loss += totals[0];
    targets += totals[1];
  }
  return loss / targets;
}

}  // namespace kiln::train
