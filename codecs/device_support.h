// What the host side of a codec needs to handle device pointers: a clear refusal in builds
// without CUDA, and a check that a kernel launch went through.
#pragma once

#include <nccl.h>

namespace terse {

// ncclSuccess in CUDA builds; otherwise ncclInvalidUsage with a message naming `codec`.
ncclResult_t require_cuda(const char* codec);

// After a kernel launch: ncclUnhandledCudaError naming `what` if the launch failed.
ncclResult_t check_launch(const char* what);

// Grid size for a grid-stride loop over `items` with `threads` per block.
unsigned grid_for(size_t items, unsigned threads);

}  // namespace terse
