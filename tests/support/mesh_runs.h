// Helpers for tests that run `kiln train` under mpirun on a device mesh and
// compare its curves with one process's at the same global batch.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {

// A mesh to run on: `flags` are the --parallelism.* and the local batch that
// keep the global batch of the test's one-process run.
struct MeshRun {
  std::string name;
  int ranks;
  std::string flags;
};

// "$KILN_MPIEXEC -n <ranks>" (ctest sets KILN_MPIEXEC).
std::string mpirun(int ranks);

// A suite's `kiln train` runs of one recipe in a scratch folder: 10 steps of
// 32 tokens on a grammar corpus's lines, every step logged, validation
// after steps 5 and 10; the first run, one process at a global batch of 8
// (dump "reference"), is the reference, and its tokenizer is every later
// run's.
class MeshRuns {
 public:
  explicit MeshRuns(std::string recipe);
  MeshRuns(const MeshRuns&) = delete;
  MeshRuns& operator=(const MeshRuns&) = delete;

  static const MeshRun& one_rank();  // "--training.local_batch_size 8"
  const CliRun& reference_run() const { return reference_run_; }
  const Curve& reference() const { return reference_; }
  const std::filesystem::path& root() const { return root_; }

  // The arguments of `kiln train` on `mesh` into <root>/<dump>.
  std::string train_args(const MeshRun& mesh, const std::string& dump,
                         const std::string& flags) const;
  // `kiln train` on `mesh.ranks` ranks; `env` as "NAME=value ...".
  CliRun kiln(const MeshRun& mesh, const std::string& dump, const std::string& flags,
              const std::string& env = "") const;
  Curve curve(const std::string& dump) const { return read_curve((root_ / dump).string()); }
  // `m` again with `flags` (another rung of the ladder: the same step
  // function, collectives included) must give the eager run's (dump m.name)
  // bits.
  void expect_same_as_eager(const MeshRun& m, const std::string& variant,
                            const std::string& flags) const;
  // A run on `saver` checkpoints at steps 5 and 10 into <saver.name>_saved
  // (close to the reference); each mesh of `resumers` continues from step 5
  // to the reference's losses.
  void expect_resumes(const MeshRun& saver, const std::vector<MeshRun>& resumers) const;

 private:
  TempDir temp_;
  std::filesystem::path root_;
  std::string recipe_;
  CliRun reference_run_;
  Curve reference_;
};

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
