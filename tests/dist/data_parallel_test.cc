// Data parallelism as a user runs it: `mpirun -n N kiln train` on the
// llama3 debug recipe (10 steps, seq_len 32, global batch 8) under DDP 2,
// SimpleFSDP 2 and 4 and HSDP 2 x 2, eagerly and in the graph trainer
// (collectives skinny or SPMD-safe, and its step with collectives inside
// replayed), gives the losses and gradient norms of
// one process at the same global batch, and so do tensor parallelism (TP 2)
// and SimpleFSDP 2 x TP 2;
// rank 0 alone reports; a checkpoint saved under FSDP 4 (4 ranks' shards)
// resumes under FSDP 2 and on one rank, one saved under FSDP 2 x TP 2 under
// TP 2 and on one rank; a rank's error names the rank; the
// SPMD handshake catches a rank running another step; ranks on other host
// devices give the same bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "kiln/io/safetensors.h"
#include "tests/support/cli.h"
#include "tests/support/mesh_runs.h"
#include "tests/support/support.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

using Mesh = MeshRun;

const std::vector<Mesh> kMeshes = {
    {"ddp2", 2, "--training.local_batch_size 4 --parallelism.data_parallel_replicate_degree 2"},
    {"fsdp2", 2, "--training.local_batch_size 4"},
    {"fsdp4", 4, "--training.local_batch_size 2"},
    {"hsdp2x2", 4, "--training.local_batch_size 2 --parallelism.data_parallel_replicate_degree 2"},
};
const Mesh& kOneRank = MeshRuns::one_rank();
// The ranks of one tp group read the same batch: only the dp ranks split it.
const std::vector<Mesh> kTensorParallelMeshes = {
    {"tp2", 2, "--training.local_batch_size 8 --parallelism.tensor_parallel_degree 2"},
    {"fsdp2xtp2", 4, "--training.local_batch_size 4 --parallelism.tensor_parallel_degree 2"},
};

class DataParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runs_ = std::make_unique<MeshRuns>("llama3_debug");
    ASSERT_EQ(runs_->reference_run().status, 0) << runs_->reference_run().output;
  }
  static void TearDownTestSuite() { runs_.reset(); }

  // The graph trainer with each collective a program of its own (the
  // default) and inside the step's program (--compile.spmd_safe).
  static void expect_graph_trainer_equals_eager(const Mesh& m) {
    runs_->expect_same_as_eager(m, "graph", "--compile.graph_trainer");
    runs_->expect_same_as_eager(m, "graph_spmd_safe",
                                "--compile.graph_trainer --compile.spmd_safe=true");
  }

  static std::unique_ptr<MeshRuns> runs_;
};

std::unique_ptr<MeshRuns> DataParallel::runs_;

// expect_close (mesh_runs.h) bounds the difference from one process.
// Observed over the 10 steps: losses within 3.4e-7 relative, norms within
// 1.7e-5 -- the same as one process accumulating 4 microbatches of 2 (the
// same split of the batch).
size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST_F(DataParallel, EveryMeshGivesTheOneProcessLosses) {
  ASSERT_EQ(runs_->reference().loss.size(), 10u);
  ASSERT_EQ(runs_->reference().val_loss.size(), 2u);
  EXPECT_LT(runs_->reference().loss.back(), runs_->reference().loss.front())
      << "the loss should fall";
  for (const Mesh& m : kMeshes) {
    // The ranks check that they run the same step (and must pass).
    CliRun eager = runs_->kiln(m, m.name, "", "KILN_SPMD_HANDSHAKE=dispatch");
    ASSERT_EQ(eager.status, 0) << m.name << "\n" << eager.output;
    EXPECT_EQ(count(eager.output, "\nstep 3 "), 1u) << "rank 0 alone reports\n" << eager.output;
    expect_close(runs_->curve(m.name), runs_->reference(), 0, m.name + " eager");

    expect_graph_trainer_equals_eager(m);
  }
}

// Ranks on host devices other than cpu:0 (KILN_CPU_DEVICES=2), their
// collectives included, give the bits of ranks on cpu:0: every rank on
// cpu:1 (rank 0's header names it), and a bare `cpu`, which puts each rank
// on its local rank's device (run_device_test checks that mapping).
TEST_F(DataParallel, RanksOnOtherHostDevicesGiveTheSameBits) {
  const Mesh& m = kMeshes[1];  // SimpleFSDP 2
  const std::string graph = "--compile.graph_trainer ";
  CliRun base = runs_->kiln(m, "fsdp2_cpu0", graph);
  ASSERT_EQ(base.status, 0) << base.output;
  for (const char* device : {"cpu:1", "cpu"}) {
    const std::string dump = std::string("fsdp2_devices_") + (device[3] ? "1" : "local");
    CliRun run = runs_->kiln(m, dump, graph + "--training.device " + device, "KILN_CPU_DEVICES=2");
    ASSERT_EQ(run.status, 0) << device << "\n" << run.output;
    const std::string header = std::string("\ndevice: ") + device + (device[3] ? ": " : ":");
    EXPECT_NE(run.output.find(header), std::string::npos) << device << "\n" << run.output;
    Curve got = runs_->curve(dump), want = runs_->curve("fsdp2_cpu0");
    EXPECT_EQ(got.loss, want.loss) << device;
    EXPECT_EQ(got.grad_norm, want.grad_norm) << device;
    EXPECT_EQ(got.loss.size(), 10u) << device;
  }
}

// The step's one program, collectives inside, recorded once and replayed
// (on GPUs: a CUDA graph holding NCCL's collectives) gives eager's bits.
TEST_F(DataParallel, AReplayedStepHoldingItsCollectivesGivesTheSameBits) {
  const Mesh& m = kMeshes[1];  // SimpleFSDP 2
  CliRun eager_run = runs_->kiln(m, "fsdp2_replay_eager", "");
  ASSERT_EQ(eager_run.status, 0) << eager_run.output;
  CliRun run = runs_->kiln(m, "fsdp2_replay",
                           "--compile.graph_trainer --compile.spmd_safe=true --compile.replay");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(run.output.find("is not recorded"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("replay: 1 recording, 9 replayed runs, 1 run launch by launch"),
            std::string::npos)
      << run.output;
  Curve got = runs_->curve("fsdp2_replay"), eager = runs_->curve("fsdp2_replay_eager");
  EXPECT_EQ(got.loss, eager.loss);
  EXPECT_EQ(got.grad_norm, eager.grad_norm);
}

// Tensor parallelism splits each projection's contraction (row-parallel
// layers sum their ranks' partial products; column-parallel inputs sum their
// gradients over tp) and the gradient norm's sum of squares, so f32 rounding
// differs from one process as it does under data parallelism, and the same
// bounds apply. Observed over the 10 steps: losses within 8.3e-8 relative,
// norms within 4.5e-7 (TP 2 and FSDP 2 x TP 2). A missing gradient sum over
// tp (replicated parameters) or a wrong norm is far outside.
TEST_F(DataParallel, TensorParallelMeshesGiveTheOneProcessLosses) {
  for (const Mesh& m : kTensorParallelMeshes) {
    CliRun eager = runs_->kiln(m, m.name, "", "KILN_SPMD_HANDSHAKE=dispatch");
    ASSERT_EQ(eager.status, 0) << m.name << "\n" << eager.output;
    EXPECT_NE(eager.output.find("x tp 2 (tensor parallel)"), std::string::npos) << eager.output;
    expect_close(runs_->curve(m.name), runs_->reference(), 0, m.name + " eager");

    expect_graph_trainer_equals_eager(m);
    // The scanned stack runs block 0's module, whose regions the plan set.
    runs_->expect_same_as_eager(m, "scan_graph", "--compile.scan_layers --compile.graph_trainer");
  }
}

// Qwen3's q/k norms act on each rank's heads only: their gradients are
// the ones summed over tp after the backward. The exported model is whole.
// (Observed: losses within 1.7e-7, norms 1.7e-6, exported weights 1.4e-5.)
TEST_F(DataParallel, TensorParallelQwen3TrainsAndExportsTheFullModel) {
  const std::string qwen3 = "--model.name qwen3_debug --checkpoint.last_save_in_hf true";
  CliRun one = runs_->kiln(kOneRank, "qwen3", qwen3);
  ASSERT_EQ(one.status, 0) << one.output;
  CliRun tp = runs_->kiln(kTensorParallelMeshes[0], "qwen3_tp2", qwen3);
  ASSERT_EQ(tp.status, 0) << tp.output;
  expect_close(runs_->curve("qwen3_tp2"), runs_->curve("qwen3"), 0, "qwen3 tp2");
  SafetensorsFile want((runs_->root() / "qwen3/hf/model.safetensors").string());
  SafetensorsFile got((runs_->root() / "qwen3_tp2/hf/model.safetensors").string());
  ASSERT_EQ(got.names(), want.names());
  for (const std::string& name : want.names())
    EXPECT_TRUE(all_close(got.get(name), want.get(name), 1e-3, 1e-4)) << name;
}

TEST_F(DataParallel, TensorParallelismRefusesWhatItCannotSplit) {
  // llama3_debug has 2 kv heads.
  CliRun r = runs_->kiln({"tp4", 4, "--parallelism.tensor_parallel_degree 4"}, "tp4", "");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--parallelism.tensor_parallel_degree 4: the model's n_kv_heads = 2 "
                          "does not divide by it"),
            std::string::npos)
      << r.output;
}

// Mixed precision (bf16 compute, f32 masters) under SimpleFSDP 2 against one
// process under bf16. The all_gather moves bf16 parameters (the values one
// process casts to) and its vjp sums the ranks' gradients in f32. What is
// left differs by bf16 rounding: each rank's half-batch weight gradient
// comes out of its matmul rounded to bf16 (2^-9 relative), where one process
// rounds the whole-batch gradient once; AdamW carries that into later
// steps. Observed over the 10 steps: losses within 2.1e-5 relative, norms
// within 1.7e-3 (the same as with the former bf16 reduce_scatter: 2.0e-5,
// 2.9e-3; at 2 ranks a bf16 sum adds one rounding to two already rounded
// terms). A wrong batch split (the losses differ from step 1) or a wrong
// gradient scale (norm 2x) is far outside 1e-4 and 1e-2.
TEST_F(DataParallel, Bf16Fsdp2GivesTheOneProcessBf16Losses) {
  const std::string bf16 = "--training.mixed_precision_param bfloat16";
  CliRun one = runs_->kiln(kOneRank, "single_bf16", bf16);
  ASSERT_EQ(one.status, 0) << one.output;
  const Mesh& fsdp2 = kMeshes[1];
  CliRun eager = runs_->kiln(fsdp2, "fsdp2_bf16", bf16);
  ASSERT_EQ(eager.status, 0) << eager.output;
  Curve want = runs_->curve("single_bf16"), got = runs_->curve("fsdp2_bf16");
  ASSERT_EQ(got.loss.size(), want.loss.size());
  for (size_t s = 0; s < want.loss.size(); ++s) {
    EXPECT_NEAR(got.loss[s], want.loss[s], 1e-4 * want.loss[s]) << "step " << s + 1;
    EXPECT_NEAR(got.grad_norm[s], want.grad_norm[s], 1e-2 * want.grad_norm[s])
        << "step " << s + 1;
  }
  CliRun graph = runs_->kiln(fsdp2, "fsdp2_bf16_graph", bf16 + " --compile.graph_trainer");
  ASSERT_EQ(graph.status, 0) << graph.output;
  EXPECT_EQ(runs_->curve("fsdp2_bf16_graph").loss, got.loss) << "graph trainer vs eager";
}

TEST_F(DataParallel, AnFsdp4CheckpointResumesOnFsdp2AndOneRank) {
  runs_->expect_resumes(kMeshes[2], {kMeshes[1], kOneRank});
  // Each of the 4 ranks wrote its shards.
  EXPECT_TRUE(fs::exists(runs_->root() /
                         "fsdp4_saved/checkpoint/step-5/optimizer-00004-of-00004.safetensors"));
}

// Checkpoints hold full tensors (the tp slices gathered): independent of tp.
TEST_F(DataParallel, AnFsdp2xTp2CheckpointResumesOnTp2AndOneRank) {
  runs_->expect_resumes(kTensorParallelMeshes[1], {kTensorParallelMeshes[0], kOneRank});
  // The 2 dp_shard ranks of tp rank 0 wrote the shards.
  EXPECT_TRUE(fs::exists(runs_->root() /
                         "fsdp2xtp2_saved/checkpoint/step-5/model-00002-of-00002.safetensors"));
}

TEST_F(DataParallel, ErrorsNameTheRank) {
  // Every rank refuses a mesh that does not fit the world.
  CliRun r = runs_->kiln(kMeshes[1], "bad_mesh", "--parallelism.data_parallel_shard_degree 3");
  EXPECT_NE(r.status, 0);
  for (const char* part : {"kiln: error: rank 0: device mesh: ", "kiln: error: rank 1: ",
                           "data_parallel_shard_degree 3", "this run has 2 (mpirun -n)"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  r = runs_->kiln(kMeshes[1], "ep", "--parallelism.expert_parallel_degree 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("rank 1: --parallelism.expert_parallel_degree 2: llama3_debug is a "
                          "dense model"),
            std::string::npos)
      << r.output;
}

// Rank 0 fails alone (it loads the tokenizer while the others wait for it
// at a barrier): the job ends at once, not after the others' collective
// timeout (300 s by default).
TEST_F(DataParallel, ARankFailingAloneEndsTheJob) {
  auto start = std::chrono::steady_clock::now();
  CliRun r = run_cli(
      "train --config llama3_debug --model.tokenizer_path /nonexistent/tokenizer.json"
      " --job.dump_folder " +
          (runs_->root() / "lone_failure").string(),
      mpirun(2));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("kiln: error: rank 0: /nonexistent/tokenizer.json"), std::string::npos)
      << r.output;
  EXPECT_LT(seconds, 60.0) << "the other rank waited for the failed one\n" << r.output;
}

TEST_F(DataParallel, TheHandshakeCatchesARankWithAnotherStep) {
  // Rank 1 does not clip: the same collectives, so without the handshake the
  // run would go on, its replicas drifting apart.
  const Mesh& ddp2 = kMeshes[0];
  const Mesh one{"", 1, ddp2.flags};
  const char* cli = std::getenv("KILN_CLI");
  CliRun r = run_cli(runs_->train_args(one, "mpmd", "") + " : -n 1 " + (cli ? cli : "kiln") + " " +
                         runs_->train_args(one, "mpmd", "--training.max_norm 0"),
                     "KILN_SPMD_HANDSHAKE=compile " + mpirun(1));
  EXPECT_NE(r.status, 0);
  for (const char* part : {"rank 0: SPMD handshake before the training step on group 'world'",
                           "rank 1: SPMD handshake", "2 kinds: rank 0; rank 1",
                           "first difference at line "})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
}

}  // namespace
}  // namespace kiln::test
