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

}  // namespace terse
