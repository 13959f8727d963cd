#include "codecs/device_support.h"

#include <algorithm>

#include "common/result.h"
#include "common/stream_hold_gate.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

ncclResult_t require_cuda(const char* codec) {
#if TERSE_HAVE_CUDA
  (void)codec;
  return ncclSuccess;
#else
  return fail(ncclInvalidUsage, "%s: device memory passed, but terse was built without CUDA",
              codec);
#endif
}

ncclResult_t check_launch(const char* what) {
#if TERSE_HAVE_CUDA
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "%s: kernel launch failed: %s", what,
                cudaGetErrorString(error));
  }
#else
  (void)what;
#endif
  return ncclSuccess;
}

ncclResult_t require_allocation_allowed(const char* what, size_t bytes) {
  if (allocation_allowed()) {
    note_allocation(what);
    return ncclSuccess;
  }
  return fail(ncclInvalidUsage,
              "%s: %zu bytes of new device or pinned memory are needed while the call's stream is "
              "held, where CUDA's allocator may wait for that stream; the call fails and the "
              "tensor's next call runs without a hold",
              what, bytes);
}

unsigned grid_for(size_t items, unsigned threads) {
  // Enough blocks to fill any current GPU several times over; grid-stride loops do the rest.
  const size_t max_blocks = 8192;
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min(max_blocks, (items + threads - 1) / threads)));
}

}  // namespace terse
