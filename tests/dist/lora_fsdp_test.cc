// LoRA under data parallelism as a user runs it: `mpirun -n N kiln train
// --lora.rank 4` on the llama3 debug recipe gives one process's losses and
// gradient norms at the same global batch under SimpleFSDP 2 (the frozen
// base weights sharded and gathered like the adapters), DDP 2 and in the
// graph trainer; a checkpoint the two FSDP ranks wrote (the adapters'
// shards) resumes on one process; the end-of-run PEFT export is the same
// adapters whatever the mesh.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/io/safetensors.h"
#include "tests/support/cli.h"
#include "tests/support/mesh_runs.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

TEST(LoraFsdp, MeshesGiveTheOneProcessLossesAndResume) {
  TempDir dir;
  const std::string recipe = dir.write("lora.toml",
                                       "[model]\nname = \"llama3_debug\"\n"
                                       "[lora]\nrank = 4\nalpha = 8.0\n"
                                       "targets = \"q,k,v,o,gate,up,down\"\n"
                                       "[checkpoint]\nlast_save_in_hf = true\n");
  MeshRuns runs(recipe);
  ASSERT_EQ(runs.reference_run().status, 0) << runs.reference_run().output;
  ASSERT_NE(runs.reference_run().output.find("lora: rank 4"), std::string::npos);
  EXPECT_LT(runs.reference().loss.back(), runs.reference().loss.front()) << "the loss should fall";

  const MeshRun fsdp2{"fsdp2", 2, "--training.local_batch_size 4"};
  const MeshRun ddp2{
      "ddp2", 2, "--training.local_batch_size 4 --parallelism.data_parallel_replicate_degree 2"};
  for (const MeshRun& m : {fsdp2, ddp2}) {
    CliRun r = runs.kiln(m, m.name, "");
    ASSERT_EQ(r.status, 0) << m.name << "\n" << r.output;
    expect_close(runs.curve(m.name), runs.reference(), 0, m.name);
  }
  runs.expect_same_as_eager(fsdp2, "graph", "--compile.graph_trainer");
  runs.expect_resumes(fsdp2, {MeshRuns::one_rank()});

  // The adapters, gathered from both ranks' shards, as one process wrote them.
  SafetensorsFile one((runs.root() / "reference/hf/adapter_model.safetensors").string());
  SafetensorsFile two((runs.root() / "fsdp2/hf/adapter_model.safetensors").string());
  ASSERT_EQ(one.names(), two.names());
  EXPECT_EQ(one.names().size(), 2u * 7u * 2u);  // lora_A, lora_B x 7 targets x 2 layers
  for (const std::string& name : one.names())
    EXPECT_TRUE(all_close(one.get(name), two.get(name), 1e-4, 1e-6)) << name;
}

}  // namespace
}  // namespace kiln::test
