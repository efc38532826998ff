#include "kiln/train/evaluation.h"

#include <chrono>

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/data/bounded_batch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/compile.h"

namespace kiln::train {
namespace {

// [the loss summed over the batch's targets, their number] (f64): a batch
// whose rows are all padding has a mean over no targets (NaN) and adds 0.
Tensor loss_sum_and_count(const CausalLM& model, const Tensor& ids, const Tensor& targets,
                          const ForwardOptions& options) {
  const DType f64 = DType::f64;
  Tensor ce = model.forward(ids, targets, options).ce_loss.to(f64);
  Tensor n = sum(ne(targets, scalar(-100, DType::i64, targets.device()))).to(f64);
  Tensor zero = scalar(0, f64, targets.device());
  return concat({where(gt(n, zero), ce * n, zero).reshape({1}), n.reshape({1})});
}

}  // namespace

double validation_loss(const CausalLM& model, data::DataLoader& loader, const ValidationPass& p) {
  KILN_CHECK(p.steps == -1 || p.steps >= 1, "validation.steps must be -1 or >= 1, got ", p.steps);
  loader.reset();
  const int64_t local = p.local_batch_size, global = local * p.dp_degree;
  const bool whole = p.steps == -1;
  const int64_t batches = whole ? (loader.windows_per_epoch() + global - 1) / global : p.steps;
  double loss = 0, targets = 0;
  for (int64_t i = 0; i < batches; ++i) {
    data::Batch b;
    {
      profile::Span span("data", "next validation batch");
      b = whole ? data::epoch_batch(loader, i * global + p.dp_rank * local, local) : loader.next();
      b = b.to(p.device);
    }
    ForwardOptions fo;
    if (p.document_mask) fo.doc_ids = b.doc_ids, fo.positions = b.positions;
    std::vector<double> totals =
        p.sum_over_dp(loss_sum_and_count(model, b.ids, b.targets, fo)).to_vector<double>();
    loss += totals[0];
    targets += totals[1];
  }
  return loss / targets;
}

std::vector<TokenSequence> document_sequences(const data::TokenCorpus& corpus, int64_t seq_len) {
  KILN_CHECK(seq_len >= 1, "document_sequences: seq_len must be >= 1, got ", seq_len);
  std::vector<TokenSequence> out;
  for (int64_t d = 0; d < corpus.num_documents(); ++d) {
    const int64_t n = std::min(corpus.document_length(d), seq_len + 1);
    if (n < 2) continue;
    std::vector<int64_t> ids(size_t(n), 0);
    std::vector<uint8_t> trained(size_t(n), 0);
    corpus.read(d, 0, n, ids.data());
    corpus.read_trained(d, 0, n, trained.data());
    TokenSequence s{{ids.begin(), ids.end() - 1}, {}};
    for (int64_t t = 1; t < n; ++t) s.targets.push_back(trained[size_t(t)] ? ids[size_t(t)] : -100);
    out.push_back(std::move(s));
  }
  return out;
}

EvalResult evaluate(const CausalLM& model, const std::vector<TokenSequence>& sequences,
                    int64_t batch_size, int64_t seq_len) {
  KILN_CHECK(batch_size >= 1 && seq_len >= 1, "evaluate: the batch bound must be at least [1, 1], got [",
             batch_size, ", ", seq_len, "]");
  const auto start = std::chrono::steady_clock::now();
  CompiledFunction loss = compile(
      [&](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{loss_sum_and_count(model, a[0], a[1], {})};
      },
      {.name = "eval"});
  EvalResult r;
  double sum = 0, count = 0;
  for (size_t first = 0; first < sequences.size(); first += size_t(batch_size)) {
    const size_t last = std::min(sequences.size(), first + size_t(batch_size));
    // The rows, padded to the bound [batch_size, seq_len] (bounded_batch.h's values).
    std::vector<int64_t> ids(size_t(batch_size * seq_len), 0), targets(ids.size(), -100);
    for (size_t i = first; i < last; ++i) {
      const TokenSequence& s = sequences[i];
      KILN_CHECK(s.ids.size() == s.targets.size() && int64_t(s.ids.size()) <= seq_len,
                 "evaluate: sequence ", i, " has ", s.ids.size(), " ids and ", s.targets.size(),
                 " targets; at most seq_len ", seq_len, " of each, as many targets as ids");
      const long row = long(i - first) * seq_len;
      std::copy(s.ids.begin(), s.ids.end(), ids.begin() + row);
      std::copy(s.targets.begin(), s.targets.end(), targets.begin() + row);
    }
    const Shape shape{batch_size, seq_len};
    const Device device = model.lm_head_weight().device();  // where the model is
    std::vector<double> totals =
        loss({from_vector(ids, shape, device), from_vector(targets, shape, device)})[0]
            .to_vector<double>();
    sum += totals[0];
    count += totals[1];
    r.sequences += int64_t(last - first);
  }
  r.tokens = int64_t(count);
  r.loss = count > 0 ? sum / count : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kiln::train
