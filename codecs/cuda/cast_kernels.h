// Launchers of the cast codecs' kernels (cast_kernels.cu). Plain C++ so host code can call them;
// only CUDA builds define them.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "codecs/dtype.h"

namespace terse {

ncclResult_t launch_cast_encode(DType input_type, DType wire_type, const void* input, void* payload,
                                float* error, size_t count, void* stream);

ncclResult_t launch_cast_decode(DType wire_type, const void* payload, DType output_type,
                                void* output, size_t count, bool accumulate, void* stream);

// output[i] = values[i] * scale rounded to `output_type`, as store_element(output, output_type,
// i, values[i] * scale) does on the host: a compressed allreduce's averaged result.
ncclResult_t launch_cast_scaled(const float* values, float scale, DType output_type, void* output,
                                size_t count, void* stream);

}  // namespace terse
