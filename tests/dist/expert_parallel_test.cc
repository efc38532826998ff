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
#include <memory>
#include <nlohmann/json.hpp>

#include "kiln/io/safetensors.h"
#include "tests/support/cli.h"
#include "tests/support/mesh_runs.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

const std::string kCapacity =
    " --parallelism.expert_dispatcher capacity --parallelism.expert_capacity_factor 4";
const MeshRun& kOneRank = MeshRuns::one_rank();
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
    runs_ = std::make_unique<MeshRuns>("qwen3_moe_debug");
    ASSERT_EQ(runs_->reference_run().status, 0) << runs_->reference_run().output;
  }
  static void TearDownTestSuite() { runs_.reset(); }

  static std::unique_ptr<MeshRuns> runs_;
};

std::unique_ptr<MeshRuns> ExpertParallel::runs_;

// The first step's routing (every rank's tokens, before any update): the
// one process's, expert by expert, with nothing dropped.
void expect_first_routing(const fs::path& dump, const nlohmann::json& want) {
  nlohmann::json first = read_metrics(dump.string()).at(0);
  EXPECT_EQ(first["moe_tokens_per_expert"], want) << dump;
  EXPECT_EQ(first["moe_dropped"], 0) << dump;
}

// Observed over the 10 steps: losses within 1e-7 relative of one process.
TEST_F(ExpertParallel, EveryMeshAndDispatcherGivesTheOneProcessLosses) {
  ASSERT_EQ(runs_->reference().loss.size(), 10u);
  EXPECT_LT(runs_->reference().loss.back(), runs_->reference().loss.front())
      << "the loss should fall";
  const nlohmann::json routing =
      read_metrics((runs_->root() / "reference").string()).at(0)["moe_tokens_per_expert"];
  int64_t assignments = 0;
  for (const auto& n : routing) assignments += n.get<int64_t>();
  EXPECT_EQ(assignments, 8 * 32 * 2 * 2) << "batch 8 x 32 tokens, top 2, 2 layers";
  for (const MeshRun& m : kMeshes) {
    CliRun eager = runs_->kiln(m, m.name, "");
    ASSERT_EQ(eager.status, 0) << m.name << "\n" << eager.output;
    EXPECT_NE(eager.output.find("experts over ep 2"), std::string::npos) << eager.output;
    expect_close(runs_->curve(m.name), runs_->reference(), 0, m.name + " eager");
    expect_first_routing(runs_->root() / m.name, routing);
  }
  // The capacity dispatcher without communication: static shapes at ep 1.
  CliRun capacity = runs_->kiln(kOneRank, "single_capacity", kCapacity);
  ASSERT_EQ(capacity.status, 0) << capacity.output;
  expect_close(runs_->curve("single_capacity"), runs_->reference(), 0, "capacity at ep 1");
  expect_first_routing(runs_->root() / "single_capacity", routing);
}

// Auxiliary-loss-free balancing moves the same biases on every rank: EP 2
// trains as one process does, and the biases are saved in the checkpoint.
TEST_F(ExpertParallel, RoutingBiasBalancingUnderEp2IsOneProcesss) {
  const std::string bias = "--model.router_bias_update_rate 0.01 --checkpoint.enable";
  CliRun one = runs_->kiln(kOneRank, "single_bias", bias);
  ASSERT_EQ(one.status, 0) << one.output;
  CliRun ep2 = runs_->kiln(kMeshes[2], "ep2xefsdp2_bias", bias);
  ASSERT_EQ(ep2.status, 0) << ep2.output;
  expect_close(runs_->curve("ep2xefsdp2_bias"), runs_->curve("single_bias"), 0,
               "ep2 x efsdp2 with routing bias");
  EXPECT_NE(runs_->curve("single_bias").loss, runs_->reference().loss)
      << "the bias changed the routing";
  SafetensorsFile one_ck(
      (runs_->root() / "single_bias/checkpoint/step-10/model.safetensors").string());
  const std::string name = "model.layers.1.mlp.gate.e_score_correction_bias";
  std::vector<float> b = one_ck.get(name).to_vector<float>();
  EXPECT_NE(b, std::vector<float>(b.size(), 0.0f)) << "the biases moved";
}

// Below the even share, experts overflow: the drops are counted (every
// rank's), and training goes on.
TEST_F(ExpertParallel, CapacityDropsAreCountedInTheMetrics) {
  CliRun r = runs_->kiln(
      kMeshes[0], "ep2_dropping",
      "--parallelism.expert_dispatcher capacity --parallelism.expert_capacity_factor 0.5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("  dropped "), std::string::npos) << r.output;
  for (const auto& j : read_metrics((runs_->root() / "ep2_dropping").string())) {
    // A rank's 4 x 32 tokens make 256 assignments per layer, of which the
    // 8 experts keep at most ceil(0.5 x 256 / 8) = 16 each: at least
    // 2 ranks x 2 layers x (256 - 128) dropped.
    EXPECT_GE(j["moe_dropped"].get<int64_t>(), 2 * 2 * 128) << j;
    EXPECT_TRUE(std::isfinite(j["loss"].get<double>())) << j;
  }
}

TEST_F(ExpertParallel, TheGraphTrainerAndTheScanGiveEagersBits) {
  for (const MeshRun& m : {kMeshes[0], kMeshes[1]}) {
    if (!fs::exists(runs_->root() / m.name)) {
      ASSERT_EQ(runs_->kiln(m, m.name, "").status, 0);
    }
    runs_->expect_same_as_eager(m, "graph", "--compile.graph_trainer");
    runs_->expect_same_as_eager(m, "graph_spmd_safe",
                                "--compile.graph_trainer --compile.spmd_safe=true");
    runs_->expect_same_as_eager(m, "scan_graph", "--compile.scan_layers --compile.graph_trainer");
    runs_->expect_same_as_eager(m, "per_block", "--compile.enable");
  }
}

// Checkpoints hold full tensors (the experts gathered): independent of ep.
TEST_F(ExpertParallel, AnEp2CheckpointResumesOnEp1AndOneRank) {
  runs_->expect_resumes(kMeshes[0], {kFsdp2, kOneRank});
}

TEST_F(ExpertParallel, RefusesWhatItCannotSplit) {
  struct Case {
    MeshRun mesh;
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {{"ep3", 4, "--parallelism.expert_parallel_degree 3"},
       "",
       "expert_parallel_degree 3 does not divide data_parallel_shard_degree 4"},
      {{"ep2_composite", 2, "--parallelism.expert_parallel_degree 2"},
       "--model.moe_impl composite",
       "model.moe_impl composite runs every expert on every token"},
      {{"ep2_local", 2, "--parallelism.expert_parallel_degree 2"},
       "--parallelism.expert_dispatcher local",
       "cannot serve experts split over 2 ranks"},
      {{"ep2_dense", 2, "--parallelism.expert_parallel_degree 2"},
       "--model.name llama3_debug",
       "llama3_debug is a dense model"},
  };
  for (const Case& c : cases) {
    CliRun r = runs_->kiln(c.mesh, c.mesh.name, c.flags);
    EXPECT_NE(r.status, 0) << c.mesh.name;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.mesh.name << "\n" << r.output;
  }
}

}  // namespace
}  // namespace kiln::test
