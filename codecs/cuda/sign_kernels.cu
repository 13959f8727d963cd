#include "codecs/cuda/scaled_codes_kernels.cuh"
#include "codecs/cuda/sign_kernels.h"
#include "codecs/sign_math.h"

namespace terse {

ncclResult_t launch_sign_encode(uint32_t block, DType input_type, const void* input, size_t count,
                                void* payload, float* error, void* stream) {
  return launch_scaled_codes_encode(SignMath{}, input_type, input, count, block, 0, payload, error,
                                    stream, "sign encode");
}

ncclResult_t launch_sign_validate(uint32_t block, const void* payload, size_t count, void* stream,
                                  bool* valid) {
  return launch_scaled_codes_validate(SignMath{}, payload, count, block, stream, "sign validate",
                                      valid);
}

ncclResult_t launch_sign_decode(uint32_t block, const void* payload, size_t count,
                                DType output_type, void* output, bool accumulate, void* stream) {
  return launch_scaled_codes_decode(SignMath{}, payload, count, block, output_type, output,
                                    accumulate, stream, "sign decode");
}

}  // namespace terse
