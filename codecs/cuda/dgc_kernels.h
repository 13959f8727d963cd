// Launchers of DGC's device steps (dgc_kernels.cu): local clipping and momentum correction,
// and momentum factor masking. The math is dgc_math.h, shared with the CPU path. Only CUDA
// builds define them.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// g = input * min(1, clip / ||input||) (clip 0: off), u = momentum u + g, v = v + u.
ncclResult_t launch_dgc_update(DType dtype, const void* input, size_t count, float clip,
                               float momentum, float* u, float* v, void* stream);

// u[i] = v[i] = 0 for the `kept` device indices.
ncclResult_t launch_dgc_mask(const uint32_t* indices, size_t kept, float* u, float* v,
                             void* stream);

}  // namespace terse
