// What the host side of a codec needs to handle device pointers: a clear refusal in builds
// without CUDA, and a check that a kernel launch went through.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "codecs/dtype.h"

namespace terse {

// ncclSuccess in CUDA builds; otherwise ncclInvalidUsage with a message naming `codec`.
ncclResult_t require_cuda(const char* codec);

// After a kernel launch: ncclUnhandledCudaError naming `what` if the launch failed.
ncclResult_t check_launch(const char* what);

// A CUDA call of terse's returned `error` (a cudaError_t): ncclUnhandledCudaError, "<what>:
// <CUDA's words>", with the failure taken off the thread's last error. CUDA keeps the latest
// failure there, so it is terse's own; left, the application's next cudaGetLastError would
// report it as the application's. A sticky error stays whatever is done.
ncclResult_t cuda_call_failed(int error, const char* what);

// ncclSuccess where this thread may allocate device or pinned memory now; inside a
// StreamHoldScope (common/stream_hold_gate.h) ncclInvalidUsage naming `what` and `bytes`: an
// allocation there could wait forever for the stream the call holds.
ncclResult_t require_allocation_allowed(const char* what, size_t bytes);

// Whether any of the `count` elements of `input` (device memory) is NaN or Inf: a kernel on
// `stream` and a wait for it. The first call on a thread makes that thread's flag (pinned
// memory, so it must be allowed to allocate then).
ncclResult_t device_holds_nonfinite(const void* input, size_t count, DType dtype, void* stream,
                                    bool* found);

// Copies `bytes` from `from` to `to` (host or device memory, either way) in `stream` order and
// waits for the copy.
ncclResult_t copy_and_wait(void* to, const void* from, size_t bytes, void* stream);

// Grid size for a grid-stride loop over `items` with `threads` per block.
unsigned grid_for(size_t items, unsigned threads);

}  // namespace terse
