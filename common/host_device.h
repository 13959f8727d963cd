// TERSE_HD marks functions that the CPU path and the CUDA kernels share, so that the codec math
// exists once: nvcc compiles them for both sides, a plain C++ compiler sees ordinary inline code.
#pragma once

#if defined(__CUDACC__)
#define TERSE_HD __host__ __device__ __forceinline__
#else
#define TERSE_HD inline
#endif

// Runtime dispatch for CPU hot loops: GCC/Clang build one clone per listed ISA level and pick
// the best at load time, so one binary uses AVX-512/AVX2+F16C where present and stays runnable
// on any x86-64. Elsewhere the loops are compiled once for the build target.
#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(TERSE_NO_CLONES)
#define TERSE_CPU_DISPATCH \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TERSE_CPU_DISPATCH
#endif
