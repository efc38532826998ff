#include "kiln/data/loader.h"

#include "kiln/base/error.h"

namespace kiln::data {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  uint64_t mix = seed;
  uint64_t state = splitmix64(mix) ^ uint64_t(epoch) * 0xD1B54A32D192ED03ull;
  for (int64_t i = n - 1; i > 0; --i) {
    // Lemire's multiply-shift: uniform in [0, i] up to a 2^-64 bias.
    auto j = int64_t((unsigned __int128)splitmix64(state) * uint64_t(i + 1) >> 64);
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

struct DataLoader::Epoch {
  int64_t index;
  PackedStream stream;
};

DataLoader::DataLoader(std::shared_ptr<const TokenCorpus> corpus, const LoaderOptions& options)
    : corpus_(std::move(corpus)), options_(options) {
  KILN_CHECK(corpus_, "data loader: no corpus");
  const auto& o = options_;
  KILN_CHECK(o.local_batch_size >= 1, "training.local_batch_size must be at least 1, not ",
             o.local_batch_size);
  KILN_CHECK(o.grad_accum_steps >= 1, "gradient accumulation steps must be at least 1, not ",
             o.grad_accum_steps);
  KILN_CHECK(o.dp_world >= 1 && o.dp_rank >= 0 && o.dp_rank < o.dp_world,
             "data loader: data-parallel rank ", o.dp_rank, " outside a world of ", o.dp_world);
  KILN_CHECK(o.packing.seq_len >= 1, "training.seq_len must be at least 1, not ", o.packing.seq_len);
  int64_t total = 0;
  for (int64_t d = 0; d < corpus_->num_documents(); ++d)
    total += packed_length(corpus_->document_length(d), o.packing);
  windows_ = total / (o.packing.seq_len + 1);
  KILN_CHECK(windows_ > 0, "the data holds ", corpus_->num_tokens(), " tokens in ",
             corpus_->num_documents(), " documents (", total,
             " with BOS/EOS), fewer than one sample of seq_len + 1 = ", o.packing.seq_len + 1,
             " tokens: give more data or a shorter sequence length");
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::global_batch_size() const {
  return options_.local_batch_size * options_.dp_world * options_.grad_accum_steps;
}

int64_t DataLoader::windows_per_epoch() const { return windows_; }

int64_t DataLoader::epoch() const {
  const auto& o = options_;
  int64_t next = pos_.samples + (o.dp_rank * o.grad_accum_steps + pos_.micro) * o.local_batch_size;
  return next / windows_;
}

const DataLoader::Epoch& DataLoader::epoch_stream(int64_t e) const {
  if (!cached_ || cached_->index != e) {
    std::vector<int64_t> order;
    if (options_.shuffle) {
      order = shuffled_order(corpus_->num_documents(), options_.seed, e);
    } else {
      order.resize(size_t(corpus_->num_documents()));
      for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
    }
    cached_.reset();  // free the old epoch first
    cached_ = std::make_unique<Epoch>(Epoch{e, PackedStream(*corpus_, std::move(order), options_.packing)});
  }
  return *cached_;
}

Batch Batch::to(Device device) const {
  auto moved = [device](const Tensor& t) { return t.defined() ? t.to(device) : t; };
  return {moved(ids), moved(targets), moved(doc_ids), moved(positions)};
}

void DataLoader::fill(int64_t first, int64_t count, Batch& out) const {
  const int64_t S = options_.packing.seq_len;
  std::vector<int64_t> ids(size_t(count * S)), targets(ids.size()), docs(ids.size()), pos(ids.size());
  for (int64_t i = 0; i < count; ++i) {
    int64_t n = first + i;
    size_t at = size_t(i * S);
    epoch_stream(n / windows_).stream.sample(n % windows_, ids.data() + at, targets.data() + at,
                                             docs.data() + at, pos.data() + at);
  }
  Shape shape{count, S};
  out.ids = from_vector(ids, shape);
  out.targets = from_vector(targets, shape);
  out.doc_ids = from_vector(docs, shape);
  out.positions = from_vector(pos, shape);
}

Batch DataLoader::next() {
  const auto& o = options_;
  const int64_t L = o.local_batch_size, A = o.grad_accum_steps;
  Batch batch;
  fill(pos_.samples + o.dp_rank * L * A + pos_.micro * L, L, batch);
  if (++pos_.micro == A) {
    pos_.micro = 0;
    pos_.samples += global_batch_size();
  }
  return batch;
}

Batch DataLoader::sample(int64_t n) const {
  KILN_CHECK(n >= 0, "data loader: sample index ", n, " is negative");
  Batch batch;
  fill(n, 1, batch);
  return batch;
}

void DataLoader::set_position(const LoaderPosition& position) {
  KILN_CHECK(position.samples >= 0 && position.micro >= 0 &&
                 position.micro < options_.grad_accum_steps,
             "data loader: invalid position (samples ", position.samples, ", microbatch ",
             position.micro, ")");
  pos_ = position;
}

nlohmann::json DataLoader::to_json() const {
  return {{"samples", pos_.samples},
          {"micro", pos_.micro},
          {"epoch", pos_.samples / windows_},
          {"seed", options_.seed},
          {"shuffle", options_.shuffle},
          {"seq_len", options_.packing.seq_len},
          {"global_batch_size", global_batch_size()},
          {"documents", corpus_->num_documents()},
          {"tokens", corpus_->num_tokens()}};
}

void DataLoader::load_json(const nlohmann::json& state) {
  KILN_CHECK(state.is_object() && state.contains("samples") && state["samples"].is_number_integer(),
             "the checkpoint's data loader state has no \"samples\" count");
  auto expect = [&](const char* key, const nlohmann::json& now, const char* what) {
    if (!state.contains(key)) return;
    KILN_CHECK(state[key] == now, "cannot resume the data loader: the checkpoint was made with ",
               what, " = ", state[key].dump(), " but this run has ", now.dump(),
               "; resume with the same data and settings, or start a fresh run");
  };
  expect("seed", options_.seed, "training.seed");
  expect("shuffle", options_.shuffle, "data.shuffle");
  expect("seq_len", options_.packing.seq_len, "training.seq_len");
  expect("global_batch_size", global_batch_size(), "global batch size");
  expect("documents", corpus_->num_documents(), "training documents");
  expect("tokens", corpus_->num_tokens(), "training tokens");
  set_position({state["samples"].get<int64_t>(), state.value("micro", int64_t(0))});
}

}  // namespace kiln::data
