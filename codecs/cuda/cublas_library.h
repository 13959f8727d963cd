// cuBLAS, loaded when PowerSGD's device path first needs it rather than when libterse loads.
// cuBLAS (with cuBLASLt) is about 700 MB of code whose relocation costs every process that links
// it some 80 ms and 26,000 page faults at start (measured on the 2-core test machine), and only
// PowerSGD on device buffers calls it; so libterse does not link it, and an application that
// never runs that path neither pays for it nor needs it installed.
#pragma once

#include <cublas_v2.h>
#include <nccl.h>

namespace terse {

// The entry points PowerSGD's kernels call (cublas_v2.h maps the plain names onto these).
struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
};

// The library of the cuBLAS major version terse was built with (libcublas.so.<major>), loaded once
// for the process: first where the dynamic loader looks, then next to the CUDA runtime libterse
// uses. ncclSystemError with dlopen's reason (naming the file) when it cannot be loaded or lacks
// an entry point; every later call gives the same answer.
ncclResult_t load_cublas(const CublasLibrary** library);

}  // namespace terse
