// Expert parallelism as a user runs it: `mpirun -n N kiln train` on the
// Qwen3-MoE debug recipe (8 experts, top 2; 10 steps, seq_len 32, global
// batch 8) with the experts split over EP 2, alone (2 ranks), with FSDP 2 of
// the experts (EP 2 x efsdp 2, 4 ranks) and under HSDP 2 x 2, through the
// all_to_all and the capacity token dispatchers (a capacity of E / top_k
// drops nothing), gives the losses, gradient norms and first routing of one
// process at the same global batch; the graph trainer, the scanned stack and
// per-block compile give eager's bits; TP 2 runs attention split with EP 2;
// capacity drops are counted; routing-bias balancing runs as on one
// process; a checkpoint saved under EP 2 resumes under EP 1 (FSDP 2) and on
// one rank; what cannot be split is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "kiln/io/safetensors.h"
#include "tests/support/cli.h"
#include "tests/support/mesh_runs.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

const std::string kCapacity =
    " --parallelism.expert_dispatcher capacity --parallelism.expert_capacity_factor 4";
const MeshRun kOneRank{"single", 1, "--training.local_batch_size 8"};
const std::vector<MeshRun> kMeshes = {
    {"ep2", 2, "--training.local_batch_size 4 --parallelism.expert_parallel_degree 2"},
    {"ep2_capacity", 2,
     "--training.local_batch_size 4 --parallelism.expert_parallel_degree 2" + kCapacity},
    {"ep2xefsdp2", 4, "--training.local_batch_size 2 --parallelism.expert_parallel_degree 2"},
    {"ep2xefsdp2_capacity", 4,
     "--training.local_batch_size 2 --parallelism.expert_parallel_degree 2" + kCapacity},
    {"hsdp2xep2", 4,
     "--training.local_batch_size 2 --parallelism.data_parallel_replicate_degree 2"
     " --parallelism.expert_parallel_degree 2"},
    // The tp ranks of a group read the same batch; attention is split, MoE replicated.
    {"ep2xtp2", 4,
     "--training.local_batch_size 4 --parallelism.expert_parallel_degree 2"
     " --parallelism.tensor_parallel_degree 2"},
};
const MeshRun kFsdp2{"fsdp2", 2, "--training.local_batch_size 4"};

class ExpertParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    root_ = temp_->path();
    write_grammar_corpus((root_ / "corpus.txt").string());
    CliRun r = kiln(kOneRank, "reference", "");
    ASSERT_EQ(r.status, 0) << r.output;
    reference_ = curve("reference");
  }
  static void TearDownTestSuite() { temp_.reset(); }

  static CliRun kiln(const MeshRun& mesh, const std::string& dump, const std::string& flags) {
    fs::path tokenizer = root_ / "reference" / "tokenizer.json";
    std::string args =
        "train --config qwen3_moe_debug --data.path " + (root_ / "corpus.txt").string() +
        " --data.text_split line --job.dump_folder " + (root_ / dump).string() +
        " --training.steps 10 --training.seq_len 32 --metrics.log_freq 1"
        " --metrics.enable_tensorboard false --lr_scheduler.warmup_steps 2"
        " --validation.enable --validation.freq 5 " +
        mesh.flags + " " + flags +
        (fs::exists(tokenizer) ? " --model.tokenizer_path " + tokenizer.string() : "");
    return run_cli(args, mesh.ranks == 1 ? "" : mpirun(mesh.ranks));
  }
  static Curve curve(const std::string& dump) { return read_curve((root_ / dump).string()); }

  // `m` again with `flags` must give the eager run's (dump m.name) bits.
  static void expect_same_as_eager(const MeshRun& m, const std::string& variant,
                                   const std::string& flags) {
    const std::string what = m.name + ": " + flags + " vs eager";
    CliRun run = kiln(m, m.name + "_" + variant, flags);
    ASSERT_EQ(run.status, 0) << what << "\n" << run.output;
    Curve g = curve(m.name + "_" + variant), e = curve(m.name);
    EXPECT_EQ(g.loss, e.loss) << what;
    EXPECT_EQ(g.grad_norm, e.grad_norm) << what;
  }

  static std::optional<TempDir> temp_;
  static fs::path root_;
  static Curve reference_;
};

std::optional<TempDir> ExpertParallel::temp_;
fs::path ExpertParallel::root_;
Curve ExpertParallel::reference_;

// The first step's routing (every rank's tokens, before any update): the
// one process's, expert by expert, with nothing dropped.
void expect_first_routing(const fs::path& dump, const nlohmann::json& want) {
  nlohmann::json first = read_metrics(dump.string()).at(0);
  EXPECT_EQ(first["moe_tokens_per_expert"], want) << dump;
  EXPECT_EQ(first["moe_dropped"], 0) << dump;
}

// Observed over the 10 steps: losses within 1e-7 relative of one process.
TEST_F(ExpertParallel, EveryMeshAndDispatcherGivesTheOneProcessLosses) {
  ASSERT_EQ(reference_.loss.size(), 10u);
  EXPECT_LT(reference_.loss.back(), reference_.loss.front()) << "the loss should fall";
  const nlohmann::json routing = read_metrics((root_ / "reference").string()).at(0)["moe_tokens_per_expert"];
  int64_t assignments = 0;
  for (const auto& n : routing) assignments += n.get<int64_t>();
  EXPECT_EQ(assignments, 8 * 32 * 2 * 2) << "batch 8 x 32 tokens, top 2, 2 layers";
  for (const MeshRun& m : kMeshes) {
    CliRun eager = kiln(m, m.name, "");
    ASSERT_EQ(eager.status, 0) << m.name << "\n" << eager.output;
    EXPECT_NE(eager.output.find("experts over ep 2"), std::string::npos) << eager.output;
    expect_close(curve(m.name), reference_, 0, m.name + " eager");
    expect_first_routing(root_ / m.name, routing);
  }
  // The capacity dispatcher without communication: static shapes at ep 1.
  CliRun capacity = kiln(kOneRank, "single_capacity", kCapacity);
  ASSERT_EQ(capacity.status, 0) << capacity.output;
  expect_close(curve("single_capacity"), reference_, 0, "capacity at ep 1");
  expect_first_routing(root_ / "single_capacity", routing);
}

// Auxiliary-loss-free balancing moves the same biases on every rank: EP 2
// trains as one process does, and the biases are saved in the checkpoint.
TEST_F(ExpertParallel, RoutingBiasBalancingUnderEp2IsOneProcesss) {
  const std::string bias = "--model.router_bias_update_rate 0.01 --checkpoint.enable";
  CliRun one = kiln(kOneRank, "single_bias", bias);
  ASSERT_EQ(one.status, 0) << one.output;
  CliRun ep2 = kiln(kMeshes[2], "ep2xefsdp2_bias", bias);
  ASSERT_EQ(ep2.status, 0) << ep2.output;
  expect_close(curve("ep2xefsdp2_bias"), curve("single_bias"), 0, "ep2 x efsdp2 with routing bias");
  EXPECT_NE(curve("single_bias").loss, reference_.loss) << "the bias changed the routing";
  SafetensorsFile one_ck((root_ / "single_bias/checkpoint/step-10/model.safetensors").string());
  const std::string name = "model.layers.1.mlp.gate.e_score_correction_bias";
  std::vector<float> b = one_ck.get(name).to_vector<float>();
  EXPECT_NE(b, std::vector<float>(b.size(), 0.0f)) << "the biases moved";
}

// Below the even share, experts overflow: the drops are counted (every
// rank's), and training goes on.
TEST_F(ExpertParallel, CapacityDropsAreCountedInTheMetrics) {
  CliRun r = kiln(kMeshes[0], "ep2_dropping",
                  "--parallelism.expert_dispatcher capacity --parallelism.expert_capacity_factor 0.5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("  dropped "), std::string::npos) << r.output;
  for (const auto& j : read_metrics((root_ / "ep2_dropping").string())) {
    // A rank's 4 x 32 tokens make 256 assignments per layer, of which the
    // 8 experts keep at most ceil(0.5 x 256 / 8) = 16 each: at least
    // 2 ranks x 2 layers x (256 - 128) dropped.
    EXPECT_GE(j["moe_dropped"].get<int64_t>(), 2 * 2 * 128) << j;
    EXPECT_TRUE(std::isfinite(j["loss"].get<double>())) << j;
  }
}

TEST_F(ExpertParallel, TheGraphTrainerAndTheScanGiveEagersBits) {
  for (const MeshRun& m : {kMeshes[0], kMeshes[1]}) {
    if (!fs::exists(root_ / m.name)) ASSERT_EQ(kiln(m, m.name, "").status, 0);
    expect_same_as_eager(m, "graph", "--compile.graph_trainer");
    expect_same_as_eager(m, "graph_spmd_safe", "--compile.graph_trainer --compile.spmd_safe=true");
    expect_same_as_eager(m, "scan_graph", "--compile.scan_layers --compile.graph_trainer");
    expect_same_as_eager(m, "per_block", "--compile.enable");
  }
}

// Checkpoints hold full tensors (the experts gathered): independent of ep.
TEST_F(ExpertParallel, AnEp2CheckpointResumesOnEp1AndOneRank) {
  const MeshRun& saver = kMeshes[0];
  CliRun r = kiln(saver, "ep2_saved", "--checkpoint.enable --checkpoint.interval 5");
  ASSERT_EQ(r.status, 0) << r.output;
  Curve whole = curve("ep2_saved");
  for (const MeshRun& m : {kFsdp2, kOneRank}) {
    std::string dump = "ep2_resumed_" + m.name;
    fs::copy(root_ / "ep2_saved", root_ / dump, fs::copy_options::recursive);
    r = kiln(m, dump, "--checkpoint.enable --checkpoint.load_step 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("(step 5)"), std::string::npos) << r.output;
    Curve c = curve(dump);
    ASSERT_EQ(c.loss.size(), 10u) << r.output;
    Curve continued{{c.loss.begin() + 5, c.loss.end()},
                    {c.grad_norm.begin() + 5, c.grad_norm.end()},
                    {c.val_loss.begin() + 1, c.val_loss.end()}};
    expect_close(continued, whole, 5, "ep2 -> " + m.name);
  }
}

TEST_F(ExpertParallel, RefusesWhatItCannotSplit) {
  struct Case {
    MeshRun mesh;
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {{"ep3", 4, "--parallelism.expert_parallel_degree 3"}, "",
       "expert_parallel_degree 3 does not divide data_parallel_shard_degree 4"},
      {{"ep2_composite", 2, "--parallelism.expert_parallel_degree 2"}, "--model.moe_impl composite",
       "model.moe_impl composite runs every expert on every token"},
      {{"ep2_local", 2, "--parallelism.expert_parallel_degree 2"},
       "--parallelism.expert_dispatcher local", "cannot serve experts split over 2 ranks"},
      {{"ep2_dense", 2, "--parallelism.expert_parallel_degree 2"}, "--model.name llama3_debug",
       "llama3_debug is a dense model"},
  };
  for (const Case& c : cases) {
    CliRun r = kiln(c.mesh, c.mesh.name, c.flags);
    EXPECT_NE(r.status, 0) << c.mesh.name;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.mesh.name << "\n" << r.output;
  }
}

}  // namespace
}  // namespace kiln::test
