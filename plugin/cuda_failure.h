// A failed CUDA runtime call of the plugin's device paths as an NCCL result (CUDA builds).
#pragma once

#if TERSE_HAVE_CUDA

#include <cuda_runtime.h>
#include <nccl.h>

namespace terse {

// ncclUnhandledCudaError naming `what`, `device` and `error`. Clears the error from the calling
// thread's last CUDA error, which holds it now, so that the application's next
// cudaGetLastError does not report terse's failure as its own (a sticky error stays whatever is
// done).
ncclResult_t cuda_failure(cudaError_t error, const char* what, int device);

}  // namespace terse

#endif
