# Embeds the headers generated fused kernels are compiled with into libkiln_backend_cpu
# as text (kiln::cpu::fused::embedded_headers(), see codegen.h), so a kernel
# generated at run time uses exactly the math this build was compiled with
# and an installed kiln needs no source tree. Included from the top-level
# CMakeLists.txt after the layer targets are defined.
set(KILN_FUSED_EMBEDDED_HEADERS
  kiln/base/half.h
  kiln/backend/cpu/scalar.h
  kiln/backend/cpu/vmath.h
  kiln/backend/cpu/elementwise_ops.h
  kiln/backend/cpu/fold.h)
set(KILN_FUSED_EMBED_OUT ${CMAKE_BINARY_DIR}/generated/kiln_fused_embedded_headers.cc)
set(KILN_FUSED_EMBED_DEPS)
foreach(h ${KILN_FUSED_EMBEDDED_HEADERS})
  list(APPEND KILN_FUSED_EMBED_DEPS ${PROJECT_SOURCE_DIR}/${h})
endforeach()
string(REPLACE ";" "," KILN_FUSED_EMBED_LIST "${KILN_FUSED_EMBEDDED_HEADERS}")
add_custom_command(
  OUTPUT ${KILN_FUSED_EMBED_OUT}
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DHEADERS=${KILN_FUSED_EMBED_LIST}
          -DOUT=${KILN_FUSED_EMBED_OUT} -P ${CMAKE_CURRENT_LIST_DIR}/embed_headers_script.cmake
  DEPENDS ${KILN_FUSED_EMBED_DEPS} ${CMAKE_CURRENT_LIST_DIR}/embed_headers_script.cmake
  COMMENT "Embedding the fused-kernel headers"
  VERBATIM)
target_sources(kiln_backend_cpu PRIVATE ${KILN_FUSED_EMBED_OUT})
