// The CPU's transfers (Backend::start_transfer) copy at once. With late
// transfers on, each copies when it is finished instead: the latest any
// backend may complete one. A program that read a transfer's destination
// before waiting for it, or let its source change before then, computes
// something else this way; tests run activation offload so to show that its
// waits are where they must be for a copy stream (CUDA) of any speed. The
// CPU then also says its transfers run apart (Backend::transfers_apart), so
// that kernels stage the offload pool's memory as they do on CUDA.
#pragma once

namespace kiln::cpu {

void set_late_transfers(bool on);

}  // namespace kiln::cpu
