// Transfers: copies that run apart from a device's kernels (on CUDA, a copy
// stream beside the compute stream), started now and finished later, so
// that activation offload's moves between device memory and the offload
// pool overlap the compute around them. A transfer is named by its
// destination buffer. Called on the device's queue thread (by kernels).
//
// finish_transfer makes the device's later work wait for the transfer; a
// destination with no transfer in flight has nothing to wait for (one
// started in an earlier program was finished at that program's end, see
// TransferScope). The bookkeeping is the calling thread's.
#pragma once
#include "kiln/runtime/device.h"
#include "kiln/runtime/kernel.h"

namespace kiln {

// Starts copying src into dst after the work issued so far. dst must not
// be the destination of a transfer still in flight.
void start_transfer(Device device, const TensorRef& dst, const TensorRef& src);
// The work issued after this waits for the transfer into `dst`, if any.
void finish_transfer(const void* dst);
// How many of the calling thread's transfers are in flight.
size_t transfers_in_flight();

// Held while a compiled program's kernels are issued: at its end the
// transfers started inside it and not finished are finished, so every
// program (and every recording of one, a CUDA graph whose copy stream must
// join its compute stream) ends with its transfers done.
class TransferScope {
 public:
  TransferScope();
  // Finishes the transfers started inside the scope and still in flight.
  void finish();
  // Also finishes them (dropping errors: after a failure).
  ~TransferScope();
  TransferScope(const TransferScope&) = delete;
  TransferScope& operator=(const TransferScope&) = delete;

 private:
  int depth_;
};

}  // namespace kiln
