// Per-block and per-element math of the `qsgd` codec (Alistarh et al., "QSGD: Communication-
// Efficient SGD via Gradient Quantization and Encoding", 2017), shared by the CPU loops and the
// CUDA kernels. TernGrad is the same rounding with one level (terngrad_math.h).
//
// Each block of `block` elements sends its norm N (max |x|, or ||x||_2 as in the paper) and, per
// element, a sign-magnitude code of kBits: the level l in [0, s] in the low kBits - 1 bits, the
// sign (set only when x < 0 and l > 0) in the top bit. With t = min(|x| / N * s, s),
// l = floor(t) + [u < t - floor(t)] where u in [0, 1) is the counter RNG at (seed, element index):
// stochastic rounding between the two nearest levels, so E[l] = t and E[x^] = x (unbiased up to
// the 2^-24 resolution of u and fp32 rounding). Decoded: x^ = sign * N * (l / s); since
// fl(l / s) <= 1, |x^| <= N exactly.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "codecs/block_stats.h"
#include "common/host_device.h"

namespace terse {

// Constants of one block, computed from the norm on the wire by both encoder and decoder.
struct LevelCoder {
  float norm;     // N: the decoded magnitude of level s
  float divisor;  // N, or 1 when N is not positive (then every |x| is 0 and every level 0)
  float levels;   // s as fp32
};

TERSE_HD LevelCoder make_level_coder(float norm, uint32_t levels) {
  // `norm > 0` is false for NaN too, so no 0/0 reaches the per-element math.
  return LevelCoder{norm, norm > 0.0f ? norm : 1.0f, static_cast<float>(levels)};
}

// The sign-magnitude code of `x`, rounded stochastically with `uniform` in [0, 1).
template <int kBits>
TERSE_HD uint32_t stochastic_level_code(const LevelCoder& coder, float x, float uniform) {
  float t = fabsf(x) / coder.divisor * coder.levels;
  // Clamps rounding overshoot (and NaN, which compares false) to s before the integer conversion.
  t = t < coder.levels ? t : coder.levels;
  const int floor_level = static_cast<int>(t);  // t >= 0: truncation is floor
  const float fraction = t - static_cast<float>(floor_level);
  const uint32_t level = static_cast<uint32_t>(floor_level) + (uniform < fraction ? 1u : 0u);
  const uint32_t negative = (x < 0.0f && level != 0) ? 1u : 0u;
  return level | (negative << (kBits - 1));
}

template <int kBits>
TERSE_HD float level_code_value(const LevelCoder& coder, uint32_t code) {
  const uint32_t level = code & ((1u << (kBits - 1)) - 1u);
  const float magnitude = coder.norm * (static_cast<float>(level) / coder.levels);
  return (code >> (kBits - 1)) != 0 ? -magnitude : magnitude;
}

// True when every code in `byte` has a level <= `levels` (a message can hold levels the code
// width allows but the header's s does not).
template <int kBits>
TERSE_HD bool level_codes_valid(uint8_t byte, uint32_t levels) {
  bool valid = true;
  for (int k = 0; k < 8 / kBits; ++k) {
    const uint32_t level = (uint32_t(byte) >> (k * kBits)) & ((1u << (kBits - 1)) - 1u);
    valid &= level <= levels;
  }
  return valid;
}

// Code width for s levels: the fewest of 2, 4, 8 bits holding sign + level (widths that divide a
// byte keep the packing branch-free; see bit_packing.h).
TERSE_HD int qsgd_code_bits(uint32_t levels) {
  return levels <= 1 ? 2 : levels <= 7 ? 4 : 8;
}

enum class QsgdNorm : uint8_t { kMax = 0, kL2 = 1 };

// The quantizer policy of scaled_codes.h. Both norms' statistics are gathered whatever the
// choice: one extra multiply-add per element is noise next to the random numbers.
template <int Bits>
struct QsgdMath {
  static constexpr int kBits = Bits;
  static constexpr bool kStochastic = true;
  static constexpr unsigned kStats = kStatMaxAbs | kStatSquareSum;

  uint32_t levels;  // s in [1, 2^(kBits-1) - 1]
  QsgdNorm norm;

  TERSE_HD float scale(const BlockStats& stats, uint32_t /*n*/) const {
    // The sum of squares of finite values overflows from about 1.8e19: the norm then saturates
    // at the largest float, which still bounds every |x| (a NaN stays NaN, and is refused).
    const float l2 = sqrtf(stats.square_sum);
    return norm == QsgdNorm::kL2 ? (l2 > FLT_MAX ? FLT_MAX : l2) : stats.max_abs;
  }

  using Coder = LevelCoder;
  TERSE_HD Coder coder(float scale) const { return make_level_coder(scale, levels); }

  TERSE_HD uint32_t encode(const Coder& coder, float x, float uniform) const {
    return stochastic_level_code<kBits>(coder, x, uniform);
  }

  TERSE_HD float decode(const Coder& coder, uint32_t code) const {
    return level_code_value<kBits>(coder, code);
  }

  // Codes need checking unless s fills the level field.
  TERSE_HD bool checks_codes() const { return levels != (1u << (kBits - 1)) - 1u; }
  TERSE_HD bool byte_valid(uint8_t byte) const { return level_codes_valid<kBits>(byte, levels); }
};

// Calls fn(QsgdMath<bits>{levels, norm}) with the code width that `levels` needs.
template <typename Fn>
auto dispatch_qsgd(uint32_t levels, QsgdNorm norm, Fn&& fn) {
  switch (qsgd_code_bits(levels)) {
    case 2:
      return fn(QsgdMath<2>{levels, norm});
    case 4:
      return fn(QsgdMath<4>{levels, norm});
    default:
      return fn(QsgdMath<8>{levels, norm});
  }
}

}  // namespace terse
