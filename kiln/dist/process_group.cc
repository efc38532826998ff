#include "kiln/dist/process_group.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kiln/base/error.h"

namespace kiln::dist {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::barrier: return "barrier";
    case CollectiveKind::send: return "send";
    case CollectiveKind::recv: return "recv";
  }
  return "collective";
}

ProcessGroup::ProcessGroup(int rank, int size, std::string name, std::vector<int> world_ranks,
                           std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), name_(std::move(name)), world_ranks_(std::move(world_ranks)),
      timeout_ms_(timeout.count()) {}

std::string ProcessGroup::describe() const {
  std::string ranks;
  for (int r : world_ranks_) {
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(r);
  }
  return cat("group '", name_, "' (world ranks ", ranks, ")");
}

void ProcessGroup::set_timeout(std::chrono::milliseconds t) {
  KILN_CHECK(t.count() > 0, describe(), ": the timeout must be positive, got ", t.count(), " ms");
  timeout_ms_ = t.count();
}

void ProcessGroup::set_timeout(std::chrono::milliseconds t, std::string setting) {
  set_timeout(t);
  timeout_setting_ = std::move(setting);
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key, std::string name) {
  std::shared_ptr<ProcessGroup> g = split_group(color, key, std::move(name));
  g->timeout_setting_ = timeout_setting_;
  return g;
}

namespace {

void check_count(const ProcessGroup& g, const char* op, int64_t count) {
  KILN_CHECK(count >= 0, op, " on ", g.describe(), ": count ", count, " must be >= 0");
}

void check_reducible(const ProcessGroup& g, const char* op, DType dtype, ReduceOp r) {
  KILN_CHECK(dtype != DType::b8, op, " on ", g.describe(),
             ": cannot reduce bool buffers; convert them to an integer dtype");
  KILN_CHECK(r != ReduceOp::avg || is_floating(dtype), op, " on ", g.describe(),
             ": avg needs a floating dtype, got ", dtype_name(dtype), "; use sum and divide");
}

void check_buffer(const ProcessGroup& g, const char* op, const void* p, int64_t count,
                  const char* what) {
  KILN_CHECK(p || count == 0, op, " on ", g.describe(), ": ", what, " is null but holds ", count,
             " elements");
}

int64_t total(std::span<const int64_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t(0));
}

}  // namespace

void ProcessGroup::check_counts(const char* op, std::span<const int64_t> counts) const {
  KILN_CHECK(int(counts.size()) == size_, op, " on ", describe(), ": got ", counts.size(),
             " counts for ", size_, " ranks; pass one count per rank");
  for (int64_t c : counts) check_count(*this, op, c);
}

void ProcessGroup::check_rank(const char* op, const char* what, int r) const {
  KILN_CHECK(r >= 0 && r < size_, op, " on ", describe(), ": ", what, " ", r,
             " is not a rank of this group of ", size_);
}

Work ProcessGroup::all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) {
  check_count(*this, "all_reduce", count);
  check_reducible(*this, "all_reduce", dtype, op);
  check_buffer(*this, "all_reduce", in, count, "in");
  check_buffer(*this, "all_reduce", out, count, "out");
  return start({.kind = CollectiveKind::all_reduce, .dtype = dtype, .in = in, .out = out,
                .count = count, .op = op});
}

Work ProcessGroup::all_gather(const void* in, void* out, std::span<const int64_t> counts,
                              DType dtype) {
  check_counts("all_gather", counts);
  check_buffer(*this, "all_gather", in, counts[size_t(rank_)], "in");
  check_buffer(*this, "all_gather", out, total(counts), "out");
  return start({.kind = CollectiveKind::all_gather, .dtype = dtype, .in = in, .out = out,
                .counts = {counts.begin(), counts.end()}});
}

Work ProcessGroup::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  std::vector<int64_t> counts(size_t(size_), count);
  return all_gather(in, out, counts, dtype);
}

Work ProcessGroup::reduce_scatter(const void* in, void* out, std::span<const int64_t> counts,
                                  DType dtype, ReduceOp op) {
  check_counts("reduce_scatter", counts);
  check_reducible(*this, "reduce_scatter", dtype, op);
  check_buffer(*this, "reduce_scatter", in, total(counts), "in");
  check_buffer(*this, "reduce_scatter", out, counts[size_t(rank_)], "out");
  return start({.kind = CollectiveKind::reduce_scatter, .dtype = dtype, .in = in, .out = out,
                .counts = {counts.begin(), counts.end()}, .op = op});
}

Work ProcessGroup::reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                                  ReduceOp op) {
  std::vector<int64_t> counts(size_t(size_), count);
  return reduce_scatter(in, out, counts, dtype, op);
}

Work ProcessGroup::all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                              std::span<const int64_t> recv_counts, DType dtype) {
  check_counts("all_to_all", send_counts);
  check_counts("all_to_all", recv_counts);
  KILN_CHECK(send_counts[size_t(rank_)] == recv_counts[size_t(rank_)], "all_to_all on ",
             describe(), ": rank ", rank_, " sends itself ", send_counts[size_t(rank_)],
             " elements but expects ", recv_counts[size_t(rank_)], " from itself");
  check_buffer(*this, "all_to_all", in, total(send_counts), "in");
  check_buffer(*this, "all_to_all", out, total(recv_counts), "out");
  return start({.kind = CollectiveKind::all_to_all, .dtype = dtype, .in = in, .out = out,
                .counts = {send_counts.begin(), send_counts.end()},
                .recv_counts = {recv_counts.begin(), recv_counts.end()}});
}

Work ProcessGroup::broadcast(void* data, int64_t count, DType dtype, int root) {
  check_count(*this, "broadcast", count);
  check_rank("broadcast", "root", root);
  check_buffer(*this, "broadcast", data, count, "data");
  return start({.kind = CollectiveKind::broadcast, .dtype = dtype, .in = data, .out = data,
                .count = count, .peer = root});
}

Work ProcessGroup::reduce(const void* in, void* out, int64_t count, DType dtype, int root,
                          ReduceOp op) {
  check_count(*this, "reduce", count);
  check_rank("reduce", "root", root);
  check_reducible(*this, "reduce", dtype, op);
  check_buffer(*this, "reduce", in, count, "in");
  if (rank_ == root) check_buffer(*this, "reduce", out, count, "out");
  return start({.kind = CollectiveKind::reduce, .dtype = dtype, .in = in, .out = out,
                .count = count, .op = op, .peer = root});
}

Work ProcessGroup::barrier() { return start({.kind = CollectiveKind::barrier}); }

namespace {
// MPI guarantees at least this many tags; NCCL has none, and keeps the order.
constexpr int kMaxTag = 32767;
}  // namespace

Work ProcessGroup::send(const void* data, int64_t count, DType dtype, int peer, int tag) {
  check_count(*this, "send", count);
  check_rank("send", "peer", peer);
  KILN_CHECK(peer != rank_, "send on ", describe(), ": rank ", peer, " cannot send to itself");
  KILN_CHECK(tag >= 0 && tag <= kMaxTag, "send on ", describe(), ": tag ", tag,
             " must be in [0, ", kMaxTag, "]");
  check_buffer(*this, "send", data, count, "data");
  return start({.kind = CollectiveKind::send, .dtype = dtype, .in = data, .count = count,
                .peer = peer, .tag = tag});
}

Work ProcessGroup::recv(void* data, int64_t count, DType dtype, int peer, int tag) {
  check_count(*this, "recv", count);
  check_rank("recv", "peer", peer);
  KILN_CHECK(peer != rank_, "recv on ", describe(), ": rank ", peer, " cannot receive from itself");
  KILN_CHECK(tag >= 0 && tag <= kMaxTag, "recv on ", describe(), ": tag ", tag,
             " must be in [0, ", kMaxTag, "]");
  check_buffer(*this, "recv", data, count, "data");
  return start({.kind = CollectiveKind::recv, .dtype = dtype, .out = data, .count = count,
                .peer = peer, .tag = tag});
}

Work run_alone(const Collective& c) {
  size_t bytes = itemsize(c.dtype);
  switch (c.kind) {
    case CollectiveKind::all_reduce:
    case CollectiveKind::reduce: bytes *= size_t(c.count); break;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter: bytes *= size_t(c.counts[0]); break;
    case CollectiveKind::all_to_all: bytes *= size_t(c.recv_counts[0]); break;
    default: bytes = 0;  // broadcast is in place; barrier has nothing to move
  }
  // send/recv never get here: a group of one has no peer.
  if (bytes > 0 && c.in != c.out) std::memmove(c.out, c.in, bytes);
  return Work();
}

std::vector<std::string> all_gather_text(ProcessGroup& g, const std::string& mine) {
  int64_t size = int64_t(mine.size());
  std::vector<int64_t> sizes(size_t(g.size()));
  g.all_gather(&size, sizes.data(), 1, DType::i64).wait();
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  std::string all(size_t(total), '\0');
  g.all_gather(mine.data(), all.data(), sizes, DType::b8).wait();  // b8: bytes as they are
  std::vector<std::string> out;
  int64_t at = 0;
  for (int64_t s : sizes) out.push_back(all.substr(size_t(at), size_t(s))), at += s;
  return out;
}

std::string world_ranks_by_text(const ProcessGroup& g, const std::vector<std::string>& texts) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < g.size(); ++r) {
    const std::string& t = texts[size_t(r)];
    if (t.empty()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == t; });
    if (it == groups.end()) it = groups.insert(groups.end(), {t, {}});
    it->second.push_back(g.world_ranks()[size_t(r)]);
  }
  std::string list;
  for (const auto& [t, ranks] : groups) {
    list += cat(list.empty() ? "" : "; ", ranks.size() == 1 ? "world rank " : "world ranks ");
    for (size_t i = 0; i < ranks.size(); ++i) list += cat(i ? ", " : "", ranks[i]);
    list += cat(": ", t);
  }
  return list;
}

}  // namespace kiln::dist
