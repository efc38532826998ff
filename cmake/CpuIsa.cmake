# The instruction sets of the CPU kernels (kiln/backend/cpu/isa.h).
#
# On x86-64 everything is built for x86-64-v3 (AVX2, FMA: Intel Haswell,
# AMD Excavator and newer), and the kernel sources below once more for
# x86-64-v4 (AVX-512) into kiln_backend_cpu_x86_64_v4, which the CPU backend
# loads at start where the CPU has AVX-512. The copy's symbols are hidden, so
# its inline and template code never stands in for the baseline's.
# KILN_NATIVE builds everything for the building machine instead, no copy.
# Elsewhere: the compiler's default target, no copy.

# The sources that loop over tensor elements.
set(KILN_CPU_ISA_SOURCES
  copy elementwise flash_attention grouped_matmul indexing linear_cross_entropy matmul
  random reduction reduction_engine rms_norm rope silu_mul)

set(isa_cc ${PROJECT_SOURCE_DIR}/kiln/backend/cpu/isa.cc)
if(KILN_NATIVE)
  set_property(SOURCE ${isa_cc} APPEND PROPERTY COMPILE_DEFINITIONS
    "KILN_CPU_BUILD_ISA=\"native (-march=native)\"")
elseif(NOT KILN_CPU_IS_X86_64)
  set_property(SOURCE ${isa_cc} APPEND PROPERTY COMPILE_DEFINITIONS
    "KILN_CPU_BUILD_ISA=\"${CMAKE_SYSTEM_PROCESSOR} (the compiler's default)\"")
else()
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/kiln/base/cpu_baseline.cc APPEND PROPERTY
    COMPILE_DEFINITIONS KILN_CPU_BASELINE_CHECK)
  set(copy kiln_backend_cpu_x86_64_v4)
  list(TRANSFORM KILN_CPU_ISA_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/kiln/backend/cpu/)
  list(TRANSFORM KILN_CPU_ISA_SOURCES APPEND .cc)
  add_library(${copy} SHARED ${KILN_CPU_ISA_SOURCES})
  # After the baseline's -march, so this one wins.
  target_compile_options(${copy} PRIVATE -march=x86-64-v4 -fvisibility=hidden
    -fvisibility-inlines-hidden)
  target_compile_definitions(${copy} PRIVATE KILN_CPU_ISA_COPY KILN_VERSION="${PROJECT_VERSION}")
  target_include_directories(${copy} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_options(${copy} PRIVATE -Wl,-z,defs)
  target_link_libraries(${copy} PRIVATE kiln_backend_cpu kiln_runtime kiln_codegen kiln_ir
    kiln_base Threads::Threads OpenMP::OpenMP_CXX DNNL::dnnl PkgConfig::XXHASH)
  set_property(SOURCE ${isa_cc} APPEND PROPERTY COMPILE_DEFINITIONS
    "KILN_CPU_BUILD_ISA=\"x86-64-v3 (AVX2)\""
    "KILN_CPU_ISA_COPY_FILE=\"$<TARGET_FILE_NAME:${copy}>\"")
  # Loaded, not linked: whatever runs kiln needs it built.
  add_dependencies(kiln ${copy})
endif()
