#include "kiln/backend/cpu/matmul_path.h"

#include <atomic>
#include <cstdlib>
#include <dnnl.hpp>

#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/backend/cpu/onednn.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

std::atomic<int> g_bf16_override{-1};

// Whether oneDNN has a matmul of `dtype` on this CPU at all: none for bf16
// below AVX-512, none for f16 without AVX512-FP16.
bool onednn_has_matmul(dnnl::memory::data_type dtype) {
  dnnl::memory::desc d({2, 2}, dtype, dnnl::memory::format_tag::ab);
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d, d, d), onednn_engine());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool onednn_has_f16_matmul() {
  static const bool has = onednn_has_matmul(dnnl::memory::data_type::f16);
  return has;
}

// The ISA oneDNN dispatches to (ONEDNN_MAX_CPU_ISA lowers it) decides, not
// cpuid: oneDNN's bf16 kernels are native only from avx512_core_bf16 up.
bool native_bf16_dot_products() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

struct Bf16Choice {
  MatmulPath path;
  std::string why;
};

Bf16Choice bf16_choice_from_env() {
  const char* env = std::getenv("KILN_CPU_BF16_MATMUL");
  const std::string v = env ? env : "";
  if (v == "native") {
    KILN_CHECK(onednn_has_matmul(dnnl::memory::data_type::bf16),
               "KILN_CPU_BF16_MATMUL=native, but oneDNN has no bf16 matmul on this CPU (isa ",
               onednn_isa(), "); use auto or f32");
    return {MatmulPath::onednn, "KILN_CPU_BF16_MATMUL=native"};
  }
  if (v == "f32") return {MatmulPath::widened_to_f32, "KILN_CPU_BF16_MATMUL=f32"};
  KILN_CHECK(v.empty() || v == "auto", "KILN_CPU_BF16_MATMUL is '", v,
             "'; expected auto, native (oneDNN's bf16 primitive) or f32 (widen to f32)");
  if (native_bf16_dot_products())
    return {MatmulPath::onednn, cat("oneDNN isa ", onednn_isa(), " has bf16 dot products")};
  return {MatmulPath::widened_to_f32, cat("oneDNN isa ", onednn_isa(), " has no bf16 dot products")};
}

// Decided once: matmul_path runs for every bf16 product.
const Bf16Choice& automatic_bf16_choice() {
  static const Bf16Choice choice = bf16_choice_from_env();
  return choice;
}

MatmulPath bf16_path() {
  const int o = g_bf16_override.load();
  return o >= 0 ? MatmulPath(o) : automatic_bf16_choice().path;
}

std::string bf16_why() {
  return g_bf16_override.load() >= 0 ? "set by a test" : automatic_bf16_choice().why;
}

}  // namespace

MatmulPath matmul_path(DType dtype) {
  switch (dtype) {
    case DType::f32: return MatmulPath::onednn;
    case DType::bf16: return bf16_path();
    case DType::f16: return onednn_has_f16_matmul() ? MatmulPath::onednn : MatmulPath::widened_to_f32;
    default: return MatmulPath::loop;
  }
}

std::string matmul_path_text(DType dtype) {
  const char* path = "";
  switch (matmul_path(dtype)) {
    case MatmulPath::onednn: path = "oneDNN's primitive"; break;
    case MatmulPath::widened_to_f32: path = "widened to f32 for oneDNN's f32 matmul"; break;
    case MatmulPath::loop: path = "a plain loop"; break;
  }
  std::string why = dtype == DType::bf16 ? bf16_why()
                    : dtype == DType::f16 ? (onednn_has_f16_matmul() ? "oneDNN has f16 matmuls here"
                                                                     : "oneDNN has no f16 matmul here")
                                          : "";
  return cat(dtype_name(dtype), " matmuls: ", path, why.empty() ? "" : cat(" (", why, ")"));
}

void set_bf16_matmul_path(std::optional<MatmulPath> path) {
  g_bf16_override.store(path ? int(*path) : -1);
}

}  // namespace kiln::cpu
