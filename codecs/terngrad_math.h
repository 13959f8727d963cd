// Per-block math of the `terngrad` codec (Wen et al., "TernGrad: Ternary Gradients to Reduce
// Communication in Distributed Deep Learning", 2017), shared by the CPU loops and the CUDA kernels.
//
// Each block sends scale S = max |x| and, per element, a ternary value b in {-1, 0, +1} with
// P(|b| = 1) = |x| / S, sign(b) = sign(x): x^ = S * b, so E[x^] = x and
// Var[x^] = S |x| - x^2 <= S |x|. That is QSGD's stochastic rounding with one level (s = 1) and the
// max norm, so the per-element math and the 2-bit sign-magnitude code are qsgd_math.h's.
// Optional clipping (the paper's gradient clipping): with clip = c > 0, S = min(max |x|, c * sigma)
// where sigma = sqrt(sum x^2 / n) is the block's RMS (the paper's standard deviation, taking the
// gradient mean as 0); |x| > S then rounds to level 1, i.e. x is clipped to +-S first. Clipping
// trades a bias for a lower variance, so the codec is unbiased only with clip = 0 (the default).
#pragma once

#include <cmath>
#include <cstdint>

#include "codecs/block_stats.h"
#include "codecs/qsgd_math.h"
#include "common/host_device.h"

namespace terse {

struct TernGradMath {
  static constexpr int kBits = 2;
  static constexpr bool kStochastic = true;
  static constexpr unsigned kStats = kStatMaxAbs | kStatSquareSum;

  float clip;  // c; 0 disables clipping
  // s = 1, held as data rather than a literal: with a constant s the compiler splits the rounding
  // into branches (t < 1 or not), which stops the CPU loop from vectorising.
  uint32_t levels = 1;

  TERSE_HD float scale(const BlockStats& stats, uint32_t n) const {
    const float max_abs = stats.max_abs;
    if (!(clip > 0.0f)) return max_abs;
    const float limit = clip * sqrtf(stats.square_sum / static_cast<float>(n));
    // A NaN max stays NaN (the comparison is false), so a NaN input still refuses the message.
    return limit < max_abs ? limit : max_abs;
  }

  using Coder = LevelCoder;
  TERSE_HD Coder coder(float scale) const { return make_level_coder(scale, levels); }

  TERSE_HD uint32_t encode(const Coder& coder, float x, float uniform) const {
    return stochastic_level_code<kBits>(coder, x, uniform);
  }

  TERSE_HD float decode(const Coder& coder, uint32_t code) const {
    return level_code_value<kBits>(coder, code);
  }

  // With one level, every 2-bit code is valid (10 is a negative zero and decodes to -0).
  TERSE_HD bool checks_codes() const { return false; }
  TERSE_HD bool byte_valid(uint8_t) const { return true; }
};

}  // namespace terse
