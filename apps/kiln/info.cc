// `kiln info`: version, devices, CPU features, oneDNN version.
#include <dnnl.hpp>

#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>

#include "apps/kiln/commands.h"
#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/base/error.h"
#include "kiln/dist/device_group.h"
#include "kiln/dist/world.h"
#include "kiln/runtime/backend.h"
#include "kiln/train/peak.h"
#include "kiln/train/peak_measure.h"

namespace kiln::cli {

namespace {

// What MFU divides by on a GPU (its data sheet's peaks), and what kiln's
// matmul reaches on it.
void print_gpu_peaks(Device d) {
  std::cout << "    mfu peak:";
  for (DType t : {DType::bf16, DType::f32}) {
    std::optional<DevicePeak> p = table_peak(d, t);
    std::cout << " " << (p ? p->source : cat("none known for ", dtype_name(t))) << ";";
  }
  std::cout << "\n    measured: kiln's matmul (" << backend(d).gemm_isa(d.index) << "), 8192^3:";
  try {
    for (DType t : {DType::bf16, DType::f32})
      std::cout << " " << std::fixed << std::setprecision(1) << train::measured_gemm_tflops(d, t)
                << " TFLOP/s " << dtype_name(t);
  } catch (const Error& e) {
    std::cout << " failed: " << e.what();
  }
  std::cout << "\n";
  std::cout.unsetf(std::ios::floatfield);
}

}  // namespace

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the version, devices and CPU features");
  auto model = std::make_shared<std::string>();
  auto seq_len = std::make_shared<int64_t>(0);
  auto json = std::make_shared<bool>(false);
  auto* model_opt = cmd->add_option(
      "--model", *model, "print this registered model's architecture, parameters and FLOPs instead");
  cmd->add_option("--seq-len", *seq_len, "sequence length for --model's FLOPs (default: the model's)")
      ->check(kPositiveCount)
      ->needs(model_opt);
  cmd->add_flag("--json", *json, "with --model: print JSON")->needs(model_opt);
  cmd->callback([model, seq_len, json] {
    if (!model->empty()) return print_model_info(*model, *seq_len, *json);
    std::cout << "kiln " << KILN_VERSION << "\n";
    std::cout << "devices:\n";
    for (DeviceKind k : {DeviceKind::cpu, DeviceKind::cuda}) {
      Backend* b = find_backend(k);
      if (!b) continue;
      for (int i = 0; i < b->device_count(); ++i) {
        std::cout << "  " << b->describe(i) << "\n";
        if (k != DeviceKind::cpu) print_gpu_peaks(Device{k, i});
      }
    }
    if (Backend* cuda = find_backend(DeviceKind::cuda); !cuda)
      std::cout << "  cuda: this kiln was built without the CUDA backend\n";
    else if (cuda->device_count() == 0)
      std::cout << "  cuda: no CUDA device (" << cuda->no_device_reason() << ")\n";
    std::cout << "collectives on cpu: " << dist::mpi_library() << "\n";
    // Loaded here only to be named: runs on one device never need it.
    if (std::string nccl = dist::describe_device_group(DeviceKind::cuda); !nccl.empty())
      std::cout << "collectives on cuda: " << nccl << "\n";
    cpu::CpuFeatures f = cpu::cpu_features();
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    std::cout << "cpu features: avx2=" << yn(f.avx2) << " avx512f=" << yn(f.avx512f)
              << " avx512_bf16=" << yn(f.avx512_bf16) << " amx_bf16=" << yn(f.amx_bf16)
              << " amx_tile=" << yn(f.amx_tile) << "\n";
    const dnnl_version_t* v = dnnl_version();
    std::cout << "oneDNN " << v->major << "." << v->minor << "." << v->patch
              << " (cpu isa: " << cpu::onednn_isa() << ")\n";
    for (DType t : {DType::f32, DType::bf16, DType::f16}) std::cout << cpu::matmul_path_text(t) << "\n";
  });
}

}  // namespace kiln::cli
