#include "tests/support/ladder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/cli.h"
#include "tests/support/train_run.h"

namespace kiln::test {

const std::vector<Rung>& ladder_rungs() {
  static const std::vector<Rung> rungs = {
      {"strict", "--runtime.eager_mode strict --compile.enable=false --compile.graph_trainer=false",
       "strict eager (op by op)"},
      {"defer_and_fuse",
       "--runtime.eager_mode defer_and_fuse --compile.enable=false --compile.graph_trainer=false",
       "defer_and_fuse eager"},
      {"per_block_compile",
       "--runtime.eager_mode strict --compile.enable --compile.graph_trainer=false",
       "per-block compile"},
      {"graph_trainer", "--runtime.eager_mode strict --compile.graph_trainer",
       "graph trainer (the whole step as one program)"},
      {"scan_strict",
       "--runtime.eager_mode strict --compile.enable=false --compile.graph_trainer=false"
       " --compile.scan_layers",
       "strict eager (op by op, the layers as one scan)"},
      {"scan_graph_trainer",
       "--runtime.eager_mode strict --compile.scan_layers --compile.graph_trainer",
       "graph trainer (the whole step as one program, the layers as one scan)"},
      {"graph_split", "--runtime.eager_mode strict --compile.graph_trainer --compile.graph_split",
       "graph trainer, split (forward and backward as separate programs, one pair for all "
       "layers)"},
      {"graph_split_layers",
       "--runtime.eager_mode strict --compile.graph_trainer --compile.graph_split"
       " --compile.graph_split_layers 1",
       "graph trainer, split (forward and backward as separate programs, one pair per 1 layer)"},
      // Not rungs, but they must keep the rungs' bits: the first steps op by
      // op while the step's program builds, and activations in host memory.
      {"graph_trainer_background",
       "--runtime.eager_mode strict --compile.graph_trainer --compile.background",
       "graph trainer (the whole step as one program)"},
      {"graph_trainer_offload",
       "--runtime.eager_mode strict --compile.graph_trainer --activation_checkpoint.mode offload",
       "graph trainer (the whole step as one program)"},
      {"scan_graph_trainer_offload",
       "--runtime.eager_mode strict --compile.scan_layers --compile.graph_trainer"
       " --activation_checkpoint.mode offload",
       "graph trainer (the whole step as one program, the layers as one scan)"},
      // Programs recorded once and replayed (on a GPU, CUDA graphs).
      {"per_block_replay",
       "--runtime.eager_mode strict --compile.enable --compile.graph_trainer=false --compile.replay",
       "per-block compile (each block's forward and backward as one program, recorded once and "
       "replayed"},
      {"graph_trainer_replay", "--runtime.eager_mode strict --compile.graph_trainer --compile.replay",
       "graph trainer (the whole step as one program, recorded once and replayed)"},
      {"scan_graph_trainer_offload_replay",
       "--runtime.eager_mode strict --compile.scan_layers --compile.graph_trainer"
       " --activation_checkpoint.mode offload --compile.replay",
       "graph trainer (the whole step as one program, the layers as one scan, recorded once and "
       "replayed)"},
  };
  return rungs;
}

const Rung& ladder_rung(const std::string& name) {
  for (const Rung& r : ladder_rungs())
    if (r.name == name) return r;
  ADD_FAILURE() << "no rung named " << name;
  return ladder_rungs()[0];
}

Curve train_curve(const std::filesystem::path& root, const std::string& recipe,
                  const std::string& name, const std::string& flags, const std::string& execution,
                  const std::string& env) {
  std::filesystem::path dump = root / (recipe + "_" + name);
  CliRun r = run_cli("train --config " + recipe + " --data.path " + (root / "corpus.txt").string() +
                         " --data.text_split line --job.dump_folder " + dump.string() +
                         " --training.steps 20 --training.seq_len 32"
                         " --training.local_batch_size 4 --metrics.log_freq 1"
                         " --metrics.enable_tensorboard false --lr_scheduler.warmup_steps 2 " +
                         flags,
                     env);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\nexecution: " + execution), std::string::npos) << r.output;
  Curve c = read_curve(dump.string());
  c.output = r.output;
  EXPECT_EQ(c.loss.size(), 20u) << r.output;
  // Replayed programs are recorded once (their buffers' addresses stay put
  // from step to step) and replayed at every later step: the whole step's
  // program or each block's. Nothing is refused.
  if (flags.find("--compile.replay") != std::string::npos) {
    EXPECT_EQ(r.output.find("is not recorded"), std::string::npos) << r.output;
    const bool whole = flags.find("--compile.graph_trainer ") != std::string::npos ||
                       flags.ends_with("--compile.graph_trainer");
    EXPECT_NE(r.output.find(whole ? "replay: 1 recording, 19 replayed runs, 1 run launch by launch"
                                  : "replay: "),
              std::string::npos)
        << r.output;
  }
  return c;
}

void expect_identical(const Curve& a, const Curve& b, const std::string& what) {
  EXPECT_EQ(a.loss, b.loss) << what << ": losses differ";
  EXPECT_EQ(a.grad_norm, b.grad_norm) << what << ": gradient norms differ";
}

void expect_device_ladder(const std::filesystem::path& root, const std::string& recipe,
                          const std::string& device, const std::string& env,
                          const std::vector<Rung>& rungs, double tolerance) {
  const Rung& strict = ladder_rungs()[0];
  const Curve cpu = train_curve(root, recipe, "cpu_strict", strict.flags, strict.execution);
  std::vector<Curve> on_device;
  for (const Rung& rung : rungs) {
    on_device.push_back(train_curve(root, recipe, device + "_" + rung.name,
                                    rung.flags + " --training.device " + device, rung.execution,
                                    env));
    const std::string named = device.find(':') == std::string::npos ? device + ":0" : device;
    EXPECT_NE(on_device.back().output.find("\ndevice: " + named + ": "), std::string::npos)
        << on_device.back().output;
    if (on_device.size() > 1)
      expect_identical(on_device.front(), on_device.back(),
                       device + ": " + rung.name + " vs " + rungs.front().name);
  }
  const Curve& first = on_device.front();
  if (tolerance == 0) {
    expect_identical(cpu, first, device + " vs cpu");
  } else {
    ASSERT_EQ(first.loss.size(), cpu.loss.size());
    for (size_t s = 0; s < cpu.loss.size(); ++s) {
      EXPECT_NEAR(first.loss[s], cpu.loss[s], tolerance * std::abs(cpu.loss[s])) << "step " << s + 1;
      EXPECT_NEAR(first.grad_norm[s], cpu.grad_norm[s], tolerance * std::abs(cpu.grad_norm[s]))
          << "step " << s + 1;
    }
  }
  EXPECT_LT(first.loss.back(), first.loss.front()) << device << ": the loss should fall";
}

}  // namespace kiln::test
