#include "kiln/backend/cuda/copy_stream.h"

#include <cuda_runtime.h>

#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/backend/cuda/strided_copy.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

// A queue thread's transfers. Its events are reused, never destroyed: the
// queue threads live as long as the process.
struct Transfers {
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> spare;
  std::unordered_map<const void*, cudaEvent_t> in_flight;  // by destination
};
thread_local Transfers t_transfers;

cudaEvent_t new_event() {
  RelaxedCapture relaxed;  // made during a capture when the spares run out
  cudaEvent_t e = nullptr;
  KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

}  // namespace

void start_transfer(const TensorRef& dst, const TensorRef& src) {
  Transfers& t = t_transfers;
  KILN_CHECK(!t.in_flight.contains(dst.data), "CUDA transfer: a transfer into ", dst.data,
             " is still in flight");
  const cudaStream_t compute = current_stream(), copies = copy_stream();
  if (!t.fork) t.fork = new_event();
  KILN_CUDA_CHECK(cudaEventRecord(t.fork, compute));
  KILN_CUDA_CHECK(cudaStreamWaitEvent(copies, t.fork, 0));
  copy_on_stream(dst, src, copies);
  cudaEvent_t done = nullptr;
  if (t.spare.empty()) {
    done = new_event();
  } else {
    done = t.spare.back();
    t.spare.pop_back();
  }
  KILN_CUDA_CHECK(cudaEventRecord(done, copies));
  t.in_flight.emplace(dst.data, done);
}

void finish_transfer(const void* dst) {
  Transfers& t = t_transfers;
  auto it = t.in_flight.find(dst);
  KILN_CHECK(it != t.in_flight.end(), "CUDA transfer: none into ", dst, " is in flight");
  const cudaEvent_t done = it->second;
  t.in_flight.erase(it);
  t.spare.push_back(done);
  KILN_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), done, 0));
}

}  // namespace kiln::cuda
