#include "codecs/cuda/qsgd_kernels.h"
#include "codecs/cuda/scaled_codes_kernels.cuh"
#include "codecs/qsgd_math.h"

namespace terse {

ncclResult_t launch_qsgd_encode(uint32_t block, uint32_t levels, QsgdNorm norm, DType input_type,
                                const void* input, size_t count, uint64_t seed, void* payload,
                                float* error, void* stream) {
  return dispatch_qsgd(levels, norm, [&](auto math) {
    return launch_scaled_codes_encode(math, input_type, input, count, block, seed, payload, error,
                                      stream, "qsgd encode");
  });
}

// The norm only matters when encoding; decoding reads it from the scales.
ncclResult_t launch_qsgd_validate(uint32_t block, uint32_t levels, const void* payload,
                                  size_t count, void* stream, bool* valid) {
  return dispatch_qsgd(levels, QsgdNorm::kMax, [&](auto math) {
    return launch_scaled_codes_validate(math, payload, count, block, stream, "qsgd validate",
                                        valid);
  });
}

ncclResult_t launch_qsgd_decode(uint32_t block, uint32_t levels, const void* payload, size_t count,
                                DType output_type, void* output, bool accumulate, void* stream) {
  return dispatch_qsgd(levels, QsgdNorm::kMax, [&](auto math) {
    return launch_scaled_codes_decode(math, payload, count, block, output_type, output, accumulate,
                                      stream, "qsgd decode");
  });
}

}  // namespace terse
