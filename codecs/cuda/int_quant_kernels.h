// Launchers of the int8/int4/int2 quantizers' kernels (int_quant_kernels.cu). Plain C++ so host
// code can call them; only CUDA builds define them. `payload` is the message after its header,
// laid out as int_quant_codecs.cpp documents.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// Writes scales, minimums (minmax) and codes of `count` elements; `error` (device, or null)
// receives input - decoded. Asynchronous on `stream`.
ncclResult_t launch_int_quant_encode(int bits, bool absmax, bool stochastic, DType input_type,
                                     const void* input, size_t count, uint32_t block, uint64_t seed,
                                     void* payload, float* error, void* stream);

// The same message for v[i] = input[i] (as fp32) + residual[i], with residual[i] receiving
// v[i] - decoded[i]: error feedback and encode in one pass, v never stored (the message and the
// residual are bit for bit those of compensating into fp32 and then encoding with the error).
ncclResult_t launch_int_quant_encode_compensated(int bits, bool absmax, bool stochastic,
                                                 DType input_type, const void* input,
                                                 float* residual, size_t count, uint32_t block,
                                                 uint64_t seed, void* payload, void* stream);

// Checks every block's scale and minimum as a host decode would and waits for the answer:
// `*first_invalid` is the lowest failing block (with its scale and base for the error message),
// or the block count when all pass.
ncclResult_t launch_int_quant_validate(int bits, bool absmax, const void* payload, size_t count,
                                       uint32_t block, void* stream, size_t* first_invalid,
                                       float* scale, float* base);

// Decodes a validated payload into `count` elements of `output_type` (adding when
// `accumulate`). Asynchronous on `stream`.
ncclResult_t launch_int_quant_decode(int bits, bool absmax, const void* payload, size_t count,
                                     uint32_t block, DType output_type, void* output,
                                     bool accumulate, void* stream);

}  // namespace terse
