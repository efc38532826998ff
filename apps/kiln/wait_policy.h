// How long the kiln command's idle OpenMP threads spin before they sleep.
#pragma once

namespace kiln::cli {

// Unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT), runs this
// program again, in place, with GOMP_SPINCOUNT=kSpinCount; returns only when
// the user did choose, or when it cannot re-execute (then libgomp's default
// stands). Call first thing in main.
inline constexpr int kSpinCount = 10000;
void bound_openmp_spinning(char** argv);

}  // namespace kiln::cli
