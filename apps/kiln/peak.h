// The CPU's sustained GEMM peak: measured by `kiln bench peak` and cached as
// JSON (kiln/train/peak.h) so MFU can be reported against it later.
#pragma once
#include <ostream>

#include "kiln/train/peak.h"

namespace kiln::cli {

// Times a few large square and training-shaped GEMMs per dtype, logging
// each to `log`, and keeps the best.
Peak measure_peak(int threads, std::ostream& log);

}  // namespace kiln::cli
