// Per-element math of error feedback, shared by the CPU loops of residual memory
// (collectives/compressed/memory/residual_entry.cpp) and the CUDA kernels
// (cuda/residual_kernels.cu), so both sides compute bit-identical residuals.
#pragma once

#include <cstddef>

#include "codecs/dtype.h"
#include "common/host_device.h"

namespace terse {

// compensated = input + residual, in fp32 whatever the input type.
template <typename In>
TERSE_HD void compensate_element(const typename In::Storage* input, const float* residual,
                                 float* compensated, size_t i) {
  compensated[i] = In::load(input[i]) + residual[i];
}

// residual = compensated - decoded: what the message failed to carry, owed to the next step.
template <typename Decoded>
TERSE_HD void update_residual_element(const float* compensated,
                                      const typename Decoded::Storage* decoded, float* residual,
                                      size_t i) {
  residual[i] = compensated[i] - Decoded::load(decoded[i]);
}

}  // namespace terse
