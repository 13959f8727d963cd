// Launchers of the error-feedback kernels (residual_kernels.cu). Plain C++ so host code can call
// them; only CUDA builds define them. All pointers are device memory; work is ordered on
// `stream` (a cudaStream_t).
#pragma once

#include <nccl.h>

#include <cstddef>

#include "codecs/dtype.h"

namespace terse {

// compensated[i] = input[i] (as fp32) + residual[i].
ncclResult_t launch_residual_compensate(DType input_type, const void* input, const float* residual,
                                        float* compensated, size_t count, void* stream);

// residual[i] = compensated[i] - decoded[i] (as fp32).
ncclResult_t launch_residual_update(DType decoded_type, const float* compensated,
                                    const void* decoded, float* residual, size_t count,
                                    void* stream);

}  // namespace terse
