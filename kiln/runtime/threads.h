// How many threads kernels use inside one op (OpenMP on the CPU).
// Default: KILN_NUM_THREADS, else every hardware thread.
#pragma once

namespace kiln {

// More would only queue on the cores, and OpenMP fails or hangs making
// tens of thousands of threads.
inline constexpr int kMaxThreads = 1024;

int num_threads();
void set_num_threads(int n);  // 1 <= n <= kMaxThreads

}  // namespace kiln
