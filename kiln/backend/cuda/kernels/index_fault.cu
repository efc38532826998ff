#include "kiln/backend/cuda/kernels/index_fault.h"

#include <mutex>
#include <unordered_map>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

const char* const kIndexOpNames[] = {"gather",         "scatter_add",
                                     "index_select",   "index_add",
                                     "embedding",      "one_hot",
                                     "linear_cross_entropy", "grouped_matmul",
                                     "grouped_matmul_weight_grad"};

std::mutex slots_mutex;
std::unordered_map<int, IndexFault*> slots;  // by device

}  // namespace

IndexFault* index_fault_slot() {
  std::lock_guard<std::mutex> lock(slots_mutex);
  IndexFault*& slot = slots[current_device()];
  if (!slot) {
    cudaStream_t s = current_stream();
    KILN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&slot), sizeof(IndexFault), s));
    KILN_CUDA_CHECK(cudaMemsetAsync(slot, 0, sizeof(IndexFault), s));
  }
  return slot;
}

std::string take_index_fault(int device) {
  IndexFault* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(slots_mutex);
    auto it = slots.find(device);
    if (it != slots.end()) slot = it->second;
  }
  if (!slot) return "";
  IndexFault f;
  KILN_CUDA_CHECK(cudaMemcpy(&f, slot, sizeof f, cudaMemcpyDefault));
  if (!f.set) return "";
  // Cleared on the stream the kernels record on, in order with them (a copy
  // from pageable memory, on the legacy stream, could land after a later
  // kernel recorded a fault, and wipe it).
  KILN_CUDA_CHECK(cudaMemsetAsync(slot, 0, sizeof f, current_stream()));
  if (f.op == int(IndexOp::grouped_matmul) || f.op == int(IndexOp::grouped_matmul_weight_grad))
    return cat(kIndexOpNames[f.op], " (CUDA): group_sizes[", f.position, "] is ", f.value,
               " but ", f.size, " rows are left for it; group sizes must not be negative and "
               "must sum to at most the number of rows");
  std::string range = f.axis >= 0 ? cat("axis ", f.axis, " of size ", f.size)
                                  : cat("a range of size ", f.size);
  return cat(kIndexOpNames[f.op], " (CUDA): index ", f.value, " is out of range for ", range,
             f.size > 0 ? cat(" (valid: 0..", f.size - 1, ")") : std::string(" (it has no entries)"),
             "; it is at flat position ", f.position, " of the index tensor");
}

}  // namespace kiln::cuda
