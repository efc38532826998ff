// The device a training run computes on (training.device): its parameters,
// optimizer state, batches and every step live there.
#pragma once
#include <string>

#include "kiln/runtime/device.h"

namespace kiln::train {

// `setting` is training.device: "cpu", "cuda" or with an index, "cuda:1".
// A kind without an index is the device of this process's local rank
// (`local_rank` of `local_ranks` on its host, 0 of 1 without mpirun): under
// mpirun each rank of a host takes its own GPU. Host devices are shared, so
// ranks beyond their count wrap around; a rank with no GPU of its own is an
// error. Throws when the device does not exist.
Device run_device(const std::string& setting, int local_rank, int local_ranks);

}  // namespace kiln::train
