#include "tests/support/mesh_runs.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/train_run.h"

namespace kiln::test {

std::string mpirun(int ranks) {
  const char* mpiexec = std::getenv("KILN_MPIEXEC");
  EXPECT_TRUE(mpiexec) << "ctest sets KILN_MPIEXEC";
  return std::string(mpiexec ? mpiexec : "mpirun") + " -n " + std::to_string(ranks);
}

MeshRuns::MeshRuns(std::string recipe) : root_(temp_.path()), recipe_(std::move(recipe)) {
  write_grammar_corpus((root_ / "corpus.txt").string());
  reference_run_ = kiln(one_rank(), "reference", "");
  reference_ = curve("reference");
}

const MeshRun& MeshRuns::one_rank() {
  static const MeshRun one{"single", 1, "--training.local_batch_size 8"};
  return one;
}

std::string MeshRuns::train_args(const MeshRun& mesh, const std::string& dump,
                                 const std::string& flags) const {
  std::filesystem::path tokenizer = root_ / "reference" / "tokenizer.json";
  return "train --config " + recipe_ + " --data.path " + (root_ / "corpus.txt").string() +
         " --data.text_split line --job.dump_folder " + (root_ / dump).string() +
         " --training.steps 10 --training.seq_len 32 --metrics.log_freq 1"
         " --metrics.enable_tensorboard false --lr_scheduler.warmup_steps 2"
         " --validation.enable --validation.freq 5 " +
         mesh.flags + " " + flags +
         (std::filesystem::exists(tokenizer) ? " --model.tokenizer_path " + tokenizer.string()
                                             : "");
}

CliRun MeshRuns::kiln(const MeshRun& mesh, const std::string& dump, const std::string& flags,
                      const std::string& env) const {
  // run_cli puts its `env` argument before the binary: here, also the launcher.
  return run_cli(train_args(mesh, dump, flags),
                 env + " " + (mesh.ranks == 1 ? "" : mpirun(mesh.ranks)));
}

void MeshRuns::expect_same_as_eager(const MeshRun& m, const std::string& variant,
                                    const std::string& flags) const {
  const std::string what = m.name + ": " + flags + " vs eager";
  CliRun run = kiln(m, m.name + "_" + variant, flags);
  ASSERT_EQ(run.status, 0) << what << "\n" << run.output;
  Curve g = curve(m.name + "_" + variant), e = curve(m.name);
  EXPECT_EQ(g.loss, e.loss) << what;
  EXPECT_EQ(g.grad_norm, e.grad_norm) << what;
}

void MeshRuns::expect_resumes(const MeshRun& saver, const std::vector<MeshRun>& resumers) const {
  const std::string saved = saver.name + "_saved";
  CliRun r = kiln(saver, saved, "--checkpoint.enable --checkpoint.interval 5");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_close(curve(saved), reference_, 0, saver.name + " with checkpoints");
  for (const MeshRun& m : resumers) {
    std::string dump = saver.name + "_resumed_" + m.name;
    std::filesystem::copy(root_ / saved, root_ / dump,
                          std::filesystem::copy_options::recursive);
    r = kiln(m, dump, "--checkpoint.enable --checkpoint.load_step 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("(step 5)"), std::string::npos) << r.output;
    // metrics.jsonl keeps steps 1-5 of the saving run, then this run's 6-10.
    Curve c = curve(dump);
    ASSERT_EQ(c.loss.size(), 10u) << r.output;
    Curve continued{{c.loss.begin() + 5, c.loss.end()},
                    {c.grad_norm.begin() + 5, c.grad_norm.end()},
                    {c.val_loss.begin() + 1, c.val_loss.end()}};
    expect_close(continued, reference_, 5, saver.name + " -> " + m.name);
  }
}

void expect_close(const Curve& got, const Curve& want, size_t first_step, const std::string& what) {
  ASSERT_EQ(got.loss.size() + first_step, want.loss.size()) << what;
  for (size_t i = 0; i < got.loss.size(); ++i) {
    size_t s = first_step + i;
    EXPECT_NEAR(got.loss[i], want.loss[s], 1e-5 * want.loss[s]) << what << ", step " << s + 1;
    EXPECT_NEAR(got.grad_norm[i], want.grad_norm[s], 1e-4 * want.grad_norm[s])
        << what << ", step " << s + 1;
  }
  // Validation splits its global batches over the dp ranks too.
  for (size_t i = 0; i < got.val_loss.size(); ++i) {
    size_t v = want.val_loss.size() - got.val_loss.size() + i;
    EXPECT_NEAR(got.val_loss[i], want.val_loss[v], 1e-5 * want.val_loss[v])
        << what << ", validation " << v + 1;
  }
}

}  // namespace kiln::test
