// OpenMP's waiting policy for the kiln command.
#pragma once

namespace kiln::cli {

// Unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT), runs
// this program again, in place, with OMP_WAIT_POLICY=passive; returns only
// when the user did choose, or when it cannot re-execute (then libgomp's
// default stands). Call first thing in main.
void use_passive_openmp(char** argv);

}  // namespace kiln::cli
