// KILN_HD marks functions that CUDA device code calls too (the scalar math,
// conversions and random streams every backend shares); it is empty in
// plain C++. Headers using it stay free of CUDA includes, so they compile as
// host C++, under nvcc and under NVRTC alike.
#pragma once

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__
#else
#define KILN_HD
#endif

// Always inlined: the scalar math and its functors, whose bodies
// (codegen/vmath.h) are large enough that GCC would otherwise call them out
// of line from a kernel's loop, which then does not vectorise.
#if defined(__CUDACC__)
#define KILN_FORCE_INLINE __forceinline__
#else
#define KILN_FORCE_INLINE inline __attribute__((always_inline))
#endif

// NVRTC has no standard headers: the fixed-width integers the portable
// headers use, as the LP64 host defines them.
#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#else
#include <cstdint>
#endif
