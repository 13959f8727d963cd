// The polling kernel of stream_wait.h's fallback: one thread that returns once
// (int32_t)(*flag - sequence) >= 0, sleeping briefly between reads of the mapped host flag.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace terse {

// `flag` is the flag's device address (cudaHostGetDevicePointer). Returns the launch's error.
cudaError_t launch_sequence_wait_kernel(cudaStream_t stream, const uint32_t* flag,
                                        uint32_t sequence);

}  // namespace terse
