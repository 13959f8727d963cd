#include "codecs/cuda/scaled_codes_kernels.cuh"
#include "codecs/cuda/terngrad_kernels.h"
#include "codecs/terngrad_math.h"

namespace terse {

ncclResult_t launch_terngrad_encode(uint32_t block, float clip, DType input_type, const void* input,
                                    size_t count, uint64_t seed, void* payload, float* error,
                                    void* stream) {
  return launch_scaled_codes_encode(TernGradMath{clip}, input_type, input, count, block, seed,
                                    payload, error, stream, "terngrad encode");
}

// Clipping only matters when encoding; decoding reads the scales.
ncclResult_t launch_terngrad_validate(uint32_t block, const void* payload, size_t count,
                                      void* stream, bool* valid) {
  return launch_scaled_codes_validate(TernGradMath{0.0f}, payload, count, block, stream,
                                      "terngrad validate", valid);
}

ncclResult_t launch_terngrad_decode(uint32_t block, const void* payload, size_t count,
                                    DType output_type, void* output, bool accumulate,
                                    void* stream) {
  return launch_scaled_codes_decode(TernGradMath{0.0f}, payload, count, block, output_type, output,
                                    accumulate, stream, "terngrad decode");
}

}  // namespace terse
