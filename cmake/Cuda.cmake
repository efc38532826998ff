# The CUDA backend (kiln/backend/cuda) is built where a CUDA toolkit is
# found: nvcc for its .cu files, and the toolkit's cudart, cuBLASLt and NVRTC.
# KILN_CUDA: AUTO (the default) builds it when found, ON requires it, OFF
# never builds it (a CPU-only build, as on a machine without the toolkit).
# Sets KILN_HAVE_CUDA.
set(KILN_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE KILN_CUDA PROPERTY STRINGS AUTO ON OFF)
set(KILN_HAVE_CUDA OFF)
if(NOT KILN_CUDA STREQUAL OFF)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cublasLt AND TARGET CUDA::nvrtc)
    set(KILN_HAVE_CUDA ON)
  elseif(KILN_CUDA STREQUAL ON)
    message(FATAL_ERROR "KILN_CUDA=ON but no CUDA toolkit with nvcc, cuBLASLt and NVRTC was "
      "found; install it (CUDA 12 or newer) or configure with -DKILN_CUDA=OFF")
  endif()
endif()
if(KILN_HAVE_CUDA)
  # Hopper's machine code plus its PTX, which newer GPUs' drivers compile.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  # CMake 3.25 knows no C++20 dialect flag for nvcc 13 (CUDA sources take
  # the C++ standard), so it is told.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  endif()
  message(STATUS "kiln: CUDA backend on (CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "kiln: CUDA backend off (no CUDA toolkit, or KILN_CUDA=OFF)")
endif()
