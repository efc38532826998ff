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
