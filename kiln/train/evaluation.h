// A model's mean loss over a dataset: the validation loss of a run, and
// `kiln eval`'s loss of a checkpoint or HF folder over documents or
// packed text. Both are means over every target (not means of batch
// means), and both keep one batch shape for every batch: a partial batch is
// padded to the bound (data/bounded_batch.h), so its padding counts for
// nothing and nothing recompiles.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/data/loader.h"
#include "kiln/models/transformer.h"

namespace kiln::train {

struct ValidationPass {
  // Global batches to evaluate; -1: every window of the split once, the last
  // global batch padded to full size.
  int64_t steps = -1;
  int64_t local_batch_size = 1;
  int64_t dp_rank = 0, dp_degree = 1;
  bool document_mask = false;
  Device device = kCPU;  // the model's
  // Sums a tensor over the dp ranks (the identity on one).
  std::function<Tensor(const Tensor&)> sum_over_dp = [](const Tensor& t) { return t; };
};

// The validation loss: the mean cross-entropy over the held-out split's
// targets, on global batches split over the data-parallel ranks as in
// training, so any mesh evaluates the same samples. `loader` (a validation
// loader: no shuffle, no accumulation) is reset first. Every rank calls it.
double validation_loss(const CausalLM& model, data::DataLoader& loader, const ValidationPass& pass);

// One row of an evaluation: targets[i] follows ids[i]; -100: no target.
struct TokenSequence {
  std::vector<int64_t> ids, targets;
};

// Each document of `corpus` as one sequence, its first seq_len + 1 tokens:
// ids = doc[:-1], targets = doc[1:], -100 where the corpus marks a token as
// no training target (a chat's prompt). A document of one token has no
// target and no sequence.
std::vector<TokenSequence> document_sequences(const data::TokenCorpus& corpus, int64_t seq_len);

struct EvalResult {
  int64_t sequences = 0, tokens = 0;  // tokens: targets evaluated
  double loss = 0;                    // mean cross-entropy over them
  double seconds = 0;                 // wall time, the compile included
};

// The mean cross-entropy of `model` over every target of `sequences`, in
// batches of batch_size rows padded to [batch_size, seq_len] that one
// compiled program runs. A sequence longer than seq_len is a kiln::Error.
EvalResult evaluate(const CausalLM& model, const std::vector<TokenSequence>& sequences,
                    int64_t batch_size, int64_t seq_len);

}  // namespace kiln::train
