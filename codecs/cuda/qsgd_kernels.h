// Launchers of the qsgd codec's kernels (qsgd_kernels.cu): the shared kernels of
// scaled_codes_kernels.cuh run with QsgdMath at the code width `levels` needs. Plain C++ so host
// code can call them; only CUDA builds define them. `payload` is the device message after its
// header.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"
#include "codecs/qsgd_math.h"

namespace terse {

ncclResult_t launch_qsgd_encode(uint32_t block, uint32_t levels, QsgdNorm norm, DType input_type,
                                const void* input, size_t count, uint64_t seed, void* payload,
                                float* error, void* stream);

// Synchronises `stream`; `*valid` says whether every scale, level and padding bit is valid.
ncclResult_t launch_qsgd_validate(uint32_t block, uint32_t levels, const void* payload,
                                  size_t count, void* stream, bool* valid);

ncclResult_t launch_qsgd_decode(uint32_t block, uint32_t levels, const void* payload, size_t count,
                                DType output_type, void* output, bool accumulate, void* stream);

}  // namespace terse
