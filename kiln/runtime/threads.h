// How many threads kernels use inside one op (OpenMP on the CPU).
// Default: KILN_NUM_THREADS, else every hardware thread.
#pragma once

namespace kiln {

int num_threads();
void set_num_threads(int n);  // n >= 1

}  // namespace kiln
