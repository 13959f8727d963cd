// Per-block and per-element math of the `sign` codec (scaled sign, as in EF-signSGD and 1-bit
// Adam), shared by the CPU loops and the CUDA kernels. See scaled_codes.h for how a quantizer
// policy like this one is driven.
//
// Each block of `block` elements sends scale = mean |x| over the block and one bit per element:
// 1 for x < 0, 0 otherwise (so +0, -0 and NaN decode to +scale). Decoded: x^ = +-scale.
// Why the mean: for fixed signs, scale = mean |x| minimises ||x - scale * sign(x)||^2, which is
// then ||x||^2 - ||x||_1^2 / n per block (the contraction that error feedback relies on).
#pragma once

#include <cfloat>
#include <cstdint>

#include "codecs/block_stats.h"
#include "common/host_device.h"

namespace terse {

struct SignMath {
  static constexpr int kBits = 1;
  static constexpr bool kStochastic = false;
  static constexpr unsigned kStats = kStatAbsSum;

  struct Coder {
    float scale;
  };

  // mean |x| over the block's `n` elements (sum in the fixed order of block_stats.h). A sum of
  // finite values can overflow near the end of fp32's range: the scale then saturates at the
  // largest float (a NaN stays NaN, and the decoder refuses it).
  TERSE_HD float scale(const BlockStats& stats, uint32_t n) const {
    const float mean = stats.abs_sum / static_cast<float>(n);
    return mean > FLT_MAX ? FLT_MAX : mean;
  }

  TERSE_HD Coder coder(float scale) const { return Coder{scale}; }

  TERSE_HD uint32_t encode(const Coder&, float x, float /*uniform*/) const {
    return x < 0.0f ? 1u : 0u;
  }

  TERSE_HD float decode(const Coder& coder, uint32_t code) const {
    return code != 0 ? -coder.scale : coder.scale;
  }

  // Every bit pattern is a valid message.
  TERSE_HD bool checks_codes() const { return false; }
  TERSE_HD bool byte_valid(uint8_t) const { return true; }
};

}  // namespace terse
