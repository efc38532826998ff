// The data loader: packed samples (see packing.h) in a deterministic order,
// handed out as local batches of a global batch split over data-parallel
// ranks and gradient-accumulation microbatches.
//
// Samples form one endless sequence over epochs: epoch e packs the corpus's
// documents in a permutation drawn from (seed, e) (or in corpus order
// without shuffle) into W windows; sample n is window n % W of epoch n / W.
// Step t uses the global batch of samples [t G, (t + 1) G), where
// G = local_batch_size x dp_world x grad_accum_steps. Rank r's share is the
// contiguous run [t G + r L A, t G + (r + 1) L A) (L = local_batch_size,
// A = grad_accum_steps), taken as A microbatches of L samples in order. So
// every mesh (and every accumulation split) with the same global batch
// trains on the same samples at each step, and the ranks' local batches
// concatenated in rank order are the single-rank global batch.
//
// The position (samples consumed, the microbatch within the step) is the
// loader's only state: to_json()/load_json() put it into a checkpoint, and
// a loader restored from it continues with exactly the samples the
// uninterrupted one would have produced.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "kiln/data/corpus.h"
#include "kiln/data/packing.h"
#include "kiln/runtime/tensor.h"

namespace kiln::data {

// A local batch: each [local_batch_size, seq_len], i64.
struct Batch {
  Tensor ids, targets, doc_ids, positions;
  Batch to(Device device) const;  // the defined ones copied to `device`
};

struct LoaderOptions {
  PackingOptions packing;
  int64_t local_batch_size = 8;
  int64_t grad_accum_steps = 1;
  int64_t dp_rank = 0, dp_world = 1;
  bool shuffle = true;  // a fresh document permutation every epoch
  uint64_t seed = 0;
};

struct LoaderPosition {
  int64_t samples = 0;  // global samples of the completed steps
  int64_t micro = 0;    // microbatches of the current step this rank has taken
};

class DataLoader {
 public:
  // `corpus` is shared; throws kiln::Error when it cannot fill one sample
  // (an empty corpus, or fewer than seq_len + 1 tokens) or the options are invalid.
  DataLoader(std::shared_ptr<const TokenCorpus> corpus, const LoaderOptions& options);
  ~DataLoader();

  // The next microbatch of this rank (advancing the position).
  Batch next();
  // Samples per step over all ranks and microbatches.
  int64_t global_batch_size() const;
  int64_t windows_per_epoch() const;
  // The epoch the next sample comes from.
  int64_t epoch() const;

  const LoaderPosition& position() const { return pos_; }
  void set_position(const LoaderPosition& position);
  // Back to the first sample (e.g. before each validation pass).
  void reset() { set_position({}); }

  // {"samples", "micro", "epoch", "seed", "shuffle", "seq_len",
  //  "global_batch_size", "documents", "tokens"}. The shuffling RNG has no
  // state beyond (seed, epoch): each epoch's permutation is drawn afresh
  // from them. Restoring checks that seed, shuffle, seq_len, the global
  // batch and the corpus size match, naming any that differ; the mesh
  // (dp_rank, dp_world, local_batch_size) may change.
  nlohmann::json to_json() const;
  void load_json(const nlohmann::json& state);

  // The sample with global index n (as a [1, seq_len] batch); for tests and tools.
  Batch sample(int64_t n) const;

 private:
  struct Epoch;
  const Epoch& epoch_stream(int64_t e) const;
  void fill(int64_t first_sample, int64_t count, Batch& out) const;

  std::shared_ptr<const TokenCorpus> corpus_;
  LoaderOptions options_;
  LoaderPosition pos_;
  int64_t windows_ = 0;
  mutable std::unique_ptr<Epoch> cached_;
};

// A document permutation of [0, n) drawn deterministically from (seed, epoch)
// (Fisher-Yates with a SplitMix64 stream); identical on every platform.
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace kiln::data
