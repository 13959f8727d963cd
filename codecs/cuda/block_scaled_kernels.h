// Launchers of the block-scaled codecs' kernels (block_scaled_kernels.cu): mxfp8, mxfp4, nvfp4.
// Plain C++ so host code can call them; only CUDA builds define them. Payloads are laid out as
// block_scaled_codecs.cpp documents.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/block_scaled_math.h"
#include "codecs/dtype.h"

namespace terse {

// Encodes `count` elements into the device message `message` whose header is already written
// (ordered on `stream`): scales and codes after the header and, for nvfp4, the tensor scale in
// the header's param1 (the message must then be 4-byte aligned). `error` (device, or null)
// receives input - decoded. Asynchronous on `stream`.
ncclResult_t launch_block_scaled_encode(BlockScaledKind kind, bool e5m2, bool stochastic,
                                        DType input_type, const void* input, size_t count,
                                        uint64_t seed, void* message, float* error, void* stream);

// Decodes a validated payload into `count` elements of `output_type` (adding when `accumulate`);
// `tensor_scale` is nvfp4's (ignored otherwise). Asynchronous on `stream`.
ncclResult_t launch_block_scaled_decode(BlockScaledKind kind, bool e5m2, const void* payload,
                                        size_t count, float tensor_scale, DType output_type,
                                        void* output, bool accumulate, void* stream);

// Copies `bytes` of a device payload to `host` and waits for the stream (validation on the host).
ncclResult_t copy_block_scaled_payload(const void* payload, size_t bytes, void* stream, void* host);

}  // namespace terse
