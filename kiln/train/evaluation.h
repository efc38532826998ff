// The validation loss: the mean cross-entropy over the held-out split's
// targets, on global batches split over the data-parallel ranks as in
// training, so any mesh evaluates the same samples.
#pragma once
#include <cstdint>
#include <functional>

#include "kiln/data/loader.h"
#include "kiln/models/transformer.h"

namespace kiln::train {

struct ValidationPass {
  // Global batches to evaluate; -1: every window of the split once, the last
  // global batch padded to full size (data/bounded_batch.h) so that it keeps
  // the others' shape while its padding counts for nothing.
  int64_t steps = -1;
  int64_t local_batch_size = 1;
  int64_t dp_rank = 0, dp_degree = 1;
  bool document_mask = false;
  // Sums a tensor over the dp ranks (the identity on one).
  std::function<Tensor(const Tensor&)> sum_over_dp = [](const Tensor& t) { return t; };
};

// Mean over every evaluated target of every rank (not a mean of batch
// means: a partial batch weighs what it holds). `loader` (a validation
// loader: no shuffle, no accumulation) is reset first. Every rank calls it.
double validation_loss(const CausalLM& model, data::DataLoader& loader, const ValidationPass& pass);

}  // namespace kiln::train
