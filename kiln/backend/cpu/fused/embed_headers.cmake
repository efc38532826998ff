# The headers the CPU's generated fused kernels are compiled with, embedded
# into libkiln_backend_cpu (kiln::cpu::fused::embedded_headers(), codegen.h).
# Included from the top-level CMakeLists.txt after the layer targets are
# defined.
kiln_embed_headers(kiln_backend_cpu kiln::cpu::fused kiln/backend/cpu/fused/codegen.h
  kiln/base/host_device.h
  kiln/base/half.h
  kiln/codegen/vmath.h
  kiln/codegen/math.h
  kiln/codegen/scalar.h
  kiln/codegen/elementwise_ops.h
  kiln/codegen/reduce_ops.h
  kiln/backend/cpu/fold.h)
