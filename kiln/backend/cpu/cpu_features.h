// What the CPU can do, read with cpuid (and what oneDNN will use).
#pragma once
#include <string>

namespace kiln::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
};

CpuFeatures cpu_features();
std::string onednn_isa();  // the highest instruction set oneDNN dispatches to
std::string cpu_model();   // the model name from /proc/cpuinfo

}  // namespace kiln::cpu
