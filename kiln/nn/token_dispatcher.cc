#include "kiln/nn/token_dispatcher.h"

#include <cmath>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/topk.h"

namespace kiln::nn {
namespace {

Tensor i64(double v, Device dev) { return scalar(v, DType::i64, dev); }

// Ascending order of integer keys [n]; equal keys keep their order (topk is stable).
Tensor stable_order(const Tensor& keys) { return topk(neg(keys), keys.dim(0), 0).second; }

// The T * top_k assignments sorted by expert (ties in token order): their
// rows of x, experts, tokens and weights.
struct Sorted {
  Tensor x, expert;
  Tensor token, weight;
};

Sorted sort_by_expert(const Tensor& x, const Routing& r) {
  const int64_t T = x.dim(0), K = r.indices.dim(1), N = T * K;
  Tensor expert_of = r.indices.reshape({N});
  Tensor order = stable_order(expert_of);
  Tensor token_of = arange(0, double(T), 1, DType::i64, x.device()).unsqueeze(1).expand({T, K});
  Sorted s;
  s.token = index_select(token_of.reshape({N}), 0, order);
  s.expert = index_select(expert_of, 0, order);
  s.x = index_select(x, 0, s.token);
  s.weight = index_select(r.weights.reshape({N}), 0, order).unsqueeze(-1);
  return s;
}

// Each token's weighted sum of the rows `y` (in assignment order).
Tensor weighted_sum(const Tensor& y, const Dispatched& d, const Tensor& x) {
  return index_add(zeros_like(x), 0, d.token, y * d.weight);
}

int64_t local_count(const MeshAxis& ep, int64_t n_experts) {
  KILN_CHECK(n_experts % ep.size == 0, "expert parallelism over '", ep.name, "' (", ep.size,
             " ranks): the layer's ", n_experts, " experts do not divide over them; choose an "
             "expert_parallel_degree that divides ", n_experts);
  return n_experts / ep.size;
}

class Local final : public TokenDispatcher {
 public:
  std::string describe() const override { return "local"; }
  int64_t local_experts(int64_t n_experts) const override { return n_experts; }
  Dispatched dispatch(const Tensor& x, const Routing& r, int64_t) const override {
    Sorted s = sort_by_expert(x, r);
    return {.x = s.x, .counts = r.counts, .dropped = i64(0, x.device()), .token = s.token,
            .weight = s.weight};
  }
  Tensor combine(const Tensor& y, const Dispatched& d, const Tensor& x) const override {
    return weighted_sum(y, d, x);
  }
};

class AllToAll final : public TokenDispatcher {
 public:
  explicit AllToAll(MeshAxis ep) : ep_(std::move(ep)) {}
  std::string describe() const override { return "all_to_all"; }
  int64_t local_experts(int64_t n_experts) const override { return local_count(ep_, n_experts); }

  Dispatched dispatch(const Tensor& x, const Routing& r, int64_t n_experts) const override {
    const Device dev = x.device();
    const int64_t n = ep_.size, El = local_experts(n_experts);
    Sorted s = sort_by_expert(x, r);
    const int64_t N = s.x.dim(0), R = n * N;  // R: the worst case, every row to one rank
    // counts[j, e]: rows for rank j's expert e; got[p, e]: rank p's for mine.
    Tensor counts = r.counts.reshape({n, El});
    Tensor got = all_to_all(counts, 0, 0, ep_);
    Dispatched d{.counts = sum(got, {0}), .dropped = i64(0, dev), .token = s.token,
                 .weight = s.weight, .send_rows = sum(counts, {1}), .recv_rows = sum(got, {1})};
    // Each row goes with its local expert, so the receiver can regroup the
    // rows (source-major as received) by expert: key expert * n + source,
    // padding last.
    std::vector<int64_t> local(static_cast<size_t>(n_experts));
    for (int64_t e = 0; e < n_experts; ++e) local[size_t(e)] = e % El;
    Tensor local_of = from_vector(local, {n_experts}, dev);
    Tensor rows = all_to_all_v(s.x, d.send_rows, d.recv_rows, R, ep_);
    Tensor expert = all_to_all_v(index_select(local_of, 0, s.expert), d.send_rows, d.recv_rows,
                                 R, ep_);
    Tensor source = segment_ids(d.recv_rows, R);
    Tensor key = where(lt(source, i64(double(n), dev)), expert * i64(double(n), dev) + source,
                       i64(double(El * n), dev));
    d.regroup = stable_order(key);
    d.x = index_select(rows, 0, d.regroup);
    return d;
  }

  Tensor combine(const Tensor& y, const Dispatched& d, const Tensor& x) const override {
    Tensor received_order = index_add(zeros_like(y), 0, d.regroup, y);
    Tensor back = all_to_all_v(received_order, d.recv_rows, d.send_rows, d.token.dim(0), ep_);
    return weighted_sum(back, d, x);
  }

 private:
  MeshAxis ep_;
};

class Capacity final : public TokenDispatcher {
 public:
  Capacity(MeshAxis ep, double factor) : ep_(std::move(ep)), factor_(factor) {
    KILN_CHECK(factor > 0 && std::isfinite(factor), "the capacity dispatcher's capacity factor "
               "must be a positive number, got ", factor);
  }
  std::string describe() const override { return cat("capacity ", factor_); }
  int64_t local_experts(int64_t n_experts) const override { return local_count(ep_, n_experts); }

  // Slots per expert for this rank's N assignments.
  int64_t capacity(int64_t N, int64_t n_experts) const {
    return std::max<int64_t>(1, int64_t(std::ceil(factor_ * double(N) / double(n_experts))));
  }

  Dispatched dispatch(const Tensor& x, const Routing& r, int64_t E) const override {
    const Device dev = x.device();
    const int64_t n = ep_.size, El = local_experts(E), D = x.dim(1);
    Sorted s = sort_by_expert(x, r);
    const int64_t N = s.x.dim(0), C = capacity(N, E);
    // An assignment's place among its expert's, in token order.
    Tensor place = arange(0, double(N), 1, DType::i64, dev) -
                   index_select(segment_starts(r.counts), 0, s.expert);
    Tensor kept = lt(place, i64(double(C), dev));
    Dispatched d{.dropped = sum(logical_not(kept).to(DType::i64)), .token = s.token,
                 .weight = s.weight};
    d.slot = where(kept, s.expert * i64(double(C), dev) + place, i64(double(E * C), dev));
    // [E * C, D] by destination rank, one spare row taking the dropped.
    Tensor slots = index_add(zeros({E * C + 1, D}, x.dtype(), dev), 0, d.slot, s.x)
                       .slice(0, 0, E * C);
    if (n > 1) slots = all_to_all(slots, 0, 0, ep_);  // [n sources, El, C, D] received
    // Expert-major: [El, n, C, D].
    d.x = slots.reshape({n, El, C, D}).transpose(0, 1).reshape({El * n * C, D});
    d.counts = full({El}, double(n * C), DType::i64, dev);
    return d;
  }

  Tensor combine(const Tensor& y, const Dispatched& d, const Tensor& x) const override {
    const int64_t D = x.dim(1), El = d.counts.dim(0), n = ep_.size;
    const int64_t C = y.dim(0) / (El * n);
    Tensor slots = y.reshape({El, n, C, D}).transpose(0, 1).reshape({n * El * C, D});
    if (n > 1) slots = all_to_all(slots, 0, 0, ep_);  // back to the senders
    Tensor with_spare = concat({slots, zeros({1, D}, y.dtype(), y.device())}, 0);
    return weighted_sum(index_select(with_spare, 0, d.slot), d, x);
  }

 private:
  MeshAxis ep_;
  double factor_;
};

}  // namespace

std::shared_ptr<const TokenDispatcher> local_dispatcher() {
  static const auto local = std::make_shared<const Local>();
  return local;
}

std::shared_ptr<const TokenDispatcher> all_to_all_dispatcher(MeshAxis ep) {
  return std::make_shared<const AllToAll>(std::move(ep));
}

std::shared_ptr<const TokenDispatcher> capacity_dispatcher(MeshAxis ep, double capacity_factor) {
  return std::make_shared<const Capacity>(std::move(ep), capacity_factor);
}

std::shared_ptr<const TokenDispatcher> make_dispatcher(const std::string& kind, MeshAxis ep,
                                                       double capacity_factor) {
  if (kind == "local") {
    KILN_CHECK(ep.size == 1, "the local token dispatcher moves no tokens, so it cannot serve "
               "experts split over ", ep.size, " ranks; use all_to_all or capacity");
    return local_dispatcher();
  }
  if (kind == "all_to_all") return all_to_all_dispatcher(std::move(ep));
  if (kind == "capacity") return capacity_dispatcher(std::move(ep), capacity_factor);
  fail("unknown token dispatcher '", kind, "'; use local, all_to_all or capacity");
}

}  // namespace kiln::nn
