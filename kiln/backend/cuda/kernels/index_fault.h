// Out-of-range indices met by the CUDA indexing kernels. The host never
// reads an index tensor, so the kernels check each index on the device,
// skip the bad ones (no stray memory access) and record the first one here;
// the backend turns the record into a kiln::Error once it has synchronised
// the device's stream (take_index_fault).
#pragma once
#include <string>

namespace kiln::cuda {

// The ops whose kernels report faults (linear_cross_entropy: its targets;
// the grouped ones: a group size, at `position`, with `size` rows left); kIndexOpNames names them in messages.
enum class IndexOp : int {
  gather, scatter_add, index_select, index_add, embedding, one_hot, linear_cross_entropy,
  grouped_matmul, grouped_matmul_weight_grad
};

struct IndexFault {
  unsigned int set;  // 0 until a kernel records a fault
  int op;            // an IndexOp
  int axis;          // the indexed axis; -1 for embedding's rows and one_hot's classes
  long long value, position, size;  // the index, its flat position, the indexed range
};

// The calling device's record (current_device()), zeroed device memory
// allocated on first use on the current stream.
IndexFault* index_fault_slot();

// On `device`'s queue thread, after its stream has been synchronised: the
// recorded fault as an error message, and the record cleared on that stream;
// "" when there was none.
std::string take_index_fault(int device);

}  // namespace kiln::cuda
