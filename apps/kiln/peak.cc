#include "apps/kiln/peak.h"

#include <algorithm>
#include <iomanip>

#include "apps/kiln/gemm_timing.h"
#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/base/error.h"

namespace kiln::cli {

Peak measure_peak(int threads, std::ostream& log) {
  Peak p{cpu::cpu_model(), cpu::onednn_isa(), threads};
  // A large square product and the two projection shapes of a transformer
  // MLP as a Linear runs them (x @ W^T): tokens x d_ff x d_model and back.
  const GemmSpec shapes[] = {{2048, 2048, 2048},
                             {4096, 3072, 768, DType::f32, false, true},
                             {4096, 768, 3072, DType::f32, false, true}};
  for (DType dtype : {DType::bf16, DType::f32}) {
    double& best = dtype == DType::bf16 ? p.bf16_gflops : p.f32_gflops;
    for (GemmSpec s : shapes) {
      s.dtype = dtype;
      s.threads = threads;
      double g = time_gemm(s).gflops;
      log << "  " << describe(s) << ": " << std::fixed << std::setprecision(1) << g << " GFLOP/s\n"
          << std::flush;
      best = std::max(best, g);
    }
  }
  return p;
}

}  // namespace kiln::cli
