// Helpers for tests that run `kiln train` under mpirun on a device mesh and
// compare its curves with one process's at the same global batch.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::test {

// A run's metrics.jsonl, per logged step.
struct Curve {
  std::vector<double> loss, grad_norm;
  std::vector<double> val_loss;  // the steps that validated
};
Curve read_curve(const std::string& dump);

// A mesh to run on: `flags` are the --parallelism.* and the local batch that
// keep the global batch of the test's one-process run.
struct MeshRun {
  std::string name;
  int ranks;
  std::string flags;
};

// "$KILN_MPIEXEC -n <ranks>" (ctest sets KILN_MPIEXEC).
std::string mpirun(int ranks);

// `got` (which may start at step first_step + 1, a resumed run) against
// `want`: losses and validation losses within 1e-5 relative, gradient
// norms within 1e-4. Not bit-identical: the ranks each reduce their part of
// the batch and the collectives add the parts in rank order, a different
// summation order from one process's (~1e-7 relative per reduction, which
// AdamW amplifies a little, the norm more than the loss). A wrong gradient
// scale (a missing 1/dp doubles the norm) or a wrong batch split (losses
// differ from step 1) is far outside.
void expect_close(const Curve& got, const Curve& want, size_t first_step, const std::string& what);

}  // namespace kiln::test
