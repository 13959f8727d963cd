#include "plugin/cuda_failure.h"

#if TERSE_HAVE_CUDA

#include "common/result.h"

namespace terse {

ncclResult_t cuda_failure(cudaError_t error, const char* what, int device) {
  cudaGetLastError();
  return fail(ncclUnhandledCudaError, "device %d: %s failed: %s", device, what,
              cudaGetErrorString(error));
}

}  // namespace terse

#endif
