#include "kiln/runtime/transfer.h"

#include <algorithm>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln {
namespace {

struct InFlight {
  const void* dst;
  Device device;
  int scope;  // the TransferScope depth it started at
};

thread_local std::vector<InFlight> t_in_flight;
thread_local int t_scope = 0;

// Finishes every transfer of the calling thread for which `pick` holds.
template <class Pick>
void finish_where(Pick pick) {
  std::vector<InFlight> picked;
  std::erase_if(t_in_flight, [&](const InFlight& t) {
    if (!pick(t)) return false;
    picked.push_back(t);
    return true;
  });
  for (const InFlight& t : picked) backend(t.device).finish_transfer(t.dst);
}

// A compiled program that failed: its transfers end before its buffers go;
// their errors are dropped (the program's own is reported).
void drain() {
  std::vector<InFlight> all;
  all.swap(t_in_flight);
  for (const InFlight& t : all) try {
      backend(t.device).finish_transfer(t.dst);
    } catch (const std::exception&) {
    }
}
[[maybe_unused]] const bool drain_registered = (register_in_flight_drain(drain), true);

// offload_start, reload_start: the move, started.
void start_kernel(const KernelArgs& a) { start_transfer(a.device, a.out[0], a.in[0]); }

// transfer_wait(moved, source): the moved value, once there. The memory
// plan gives both one buffer; eager modes give the result its own.
void wait_kernel(const KernelArgs& a) {
  const TensorRef &moved = a.in[0], &out = a.out[0];
  finish_transfer(moved.data);
  if (out.data != moved.data) backend(a.device).strided_copy(out, moved);
}

#define KILN_TRANSFER_KERNELS(KIND)                  \
  {KIND, "offload_start", {start_kernel, true}},     \
  {KIND, "reload_start", {start_kernel, true}},      \
  {KIND, "transfer_wait", {wait_kernel, true}}
const KernelRegistrar registrations[] = {KILN_TRANSFER_KERNELS(DeviceKind::cpu),
                                         KILN_TRANSFER_KERNELS(DeviceKind::cuda)};
#undef KILN_TRANSFER_KERNELS

}  // namespace

void start_transfer(Device device, const TensorRef& dst, const TensorRef& src) {
  if (dst.numel() == 0) return;
  KILN_CHECK(std::none_of(t_in_flight.begin(), t_in_flight.end(),
                          [&](const InFlight& t) { return t.dst == dst.data; }),
             "a transfer into a buffer another transfer still writes; each must be finished "
             "(transfer_wait) before its buffer is written again");
  backend(device).start_transfer(dst, src);
  t_in_flight.push_back({dst.data, device, t_scope});
}

void finish_transfer(const void* dst) {
  finish_where([&](const InFlight& t) { return t.dst == dst; });
}

size_t transfers_in_flight() { return t_in_flight.size(); }

TransferScope::TransferScope() : depth_(++t_scope) {}

void TransferScope::finish() {
  finish_where([&](const InFlight& t) { return t.scope >= depth_; });
}

TransferScope::~TransferScope() {
  try {
    finish();
  } catch (const std::exception&) {
  }
  --t_scope;
}

}  // namespace kiln
