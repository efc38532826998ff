# The headers CUDA's generated kernels are compiled with (by NVRTC), embedded
# into libkiln_backend_cuda (kiln::cuda::fused::embedded_headers(),
# codegen.h): the portable ones the CPU's generated code embeds too.
# Included from the top-level CMakeLists.txt when the CUDA backend is built.
kiln_embed_headers(kiln_backend_cuda kiln::cuda::fused kiln/backend/cuda/fused/codegen.h
  kiln/base/host_device.h
  kiln/base/half.h
  kiln/codegen/vmath.h
  kiln/codegen/math.h
  kiln/codegen/scalar.h
  kiln/codegen/elementwise_ops.h
  kiln/codegen/reduce_ops.h)
