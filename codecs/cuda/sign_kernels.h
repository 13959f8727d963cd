// Launchers of the sign codec's kernels (sign_kernels.cu): the shared kernels of
// scaled_codes_kernels.cuh run with SignMath. Plain C++ so host code can call them; only CUDA
// builds define them. `payload` is the device message after its header.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

ncclResult_t launch_sign_encode(uint32_t block, DType input_type, const void* input, size_t count,
                                void* payload, float* error, void* stream);

// Synchronises `stream`; `*valid` says whether every scale and the padding are valid.
ncclResult_t launch_sign_validate(uint32_t block, const void* payload, size_t count, void* stream,
                                  bool* valid);

ncclResult_t launch_sign_decode(uint32_t block, const void* payload, size_t count,
                                DType output_type, void* output, bool accumulate, void* stream);

}  // namespace terse
