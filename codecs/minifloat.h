// The small floating-point element formats of the block-scaled codecs (mxfp8, mxfp4, nvfp4), as
// the OCP Microscaling Formats (MX) v1.0 specification defines them, and the conversions of an
// fp32 value to and from them, shared by the CPU loops and the CUDA kernels.
//
//   E4M3: bias 7, 3 mantissa bits, subnormals, max normal 448 (S.1111.110); S.1111.111 is NaN;
//         no infinities.
//   E5M2: bias 15, 2 mantissa bits, subnormals, max normal 57344 (S.11110.11); S.11111.00 is
//         infinity, S.11111.xx (xx != 0) NaN, as in IEEE 754.
//   E2M1: bias 1, 1 mantissa bit, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; no NaN, no infinity.
//   E8M0: the MX shared scale, an unsigned biased exponent: 2^(byte - 127); 0xFF is NaN.
//
// Conversion to an element (minifloat_magnitude_code) saturates: a magnitude above the max
// normal becomes the max normal (the MX specification's saturating conversion), so the NaN and
// infinity codes are never produced. Rounding is to nearest, ties to the even code (the code
// whose mantissa's last bit is 0), or stochastic: with t the magnitude in units of the format's
// spacing around it (its quantum), the magnitude rounds up with probability frac(t), decided as
// frac(t) >= 1 - u for the caller's u in [0, 1) with 24 random bits (so a fraction below 2^-24
// never rounds up, and the draw is exact in fp32).
#pragma once

#include <cstdint>

#include "common/float_convert.h"
#include "common/host_device.h"

// TERSE_HD, forced inline on the host: the CPU loops that call these are ISA clones
// (TERSE_CPU_DISPATCH), and a call left out of line runs scalar baseline code per element.
#if !defined(__CUDACC__) && defined(__GNUC__)
#define TERSE_MINIFLOAT_HD __attribute__((always_inline)) inline
#else
#define TERSE_MINIFLOAT_HD TERSE_HD
#endif

namespace terse {

struct E4M3 {
  static constexpr int kBits = 8;
  static constexpr int kMantissaBits = 3;
  static constexpr int kBias = 7;
  static constexpr int kMinExponent = -6;  // of the smallest normal, 2^-6
  static constexpr int kMaxExponent = 8;   // of the largest binade, emax_elem in the MX spec
  static constexpr float kMaxNormal = 448.0f;
  static constexpr uint32_t kSignBit = 0x80u;
  // The smallest magnitude code that is not a number: S.1111.111 (NaN).
  static constexpr uint32_t kFirstSpecial = 0x7fu;
  static constexpr uint32_t kNanCode = 0x7fu;
  static constexpr uint32_t kInfinityCode = 0x7fu;  // no infinity: NaN stands for it
  TERSE_HD static bool is_number(uint32_t code) { return (code & 0x7fu) < kFirstSpecial; }
};

struct E5M2 {
  static constexpr int kBits = 8;
  static constexpr int kMantissaBits = 2;
  static constexpr int kBias = 15;
  static constexpr int kMinExponent = -14;
  static constexpr int kMaxExponent = 15;
  static constexpr float kMaxNormal = 57344.0f;
  static constexpr uint32_t kSignBit = 0x80u;
  // Exponent field 11111: infinities (mantissa 0) and NaNs.
  static constexpr uint32_t kFirstSpecial = 0x7cu;
  static constexpr uint32_t kNanCode = 0x7eu;
  static constexpr uint32_t kInfinityCode = 0x7cu;
  TERSE_HD static bool is_number(uint32_t code) { return (code & 0x7fu) < kFirstSpecial; }
};

struct E2M1 {
  static constexpr int kBits = 4;
  static constexpr int kMantissaBits = 1;
  static constexpr int kBias = 1;
  static constexpr int kMinExponent = 0;
  static constexpr int kMaxExponent = 2;
  static constexpr float kMaxNormal = 6.0f;
  static constexpr uint32_t kSignBit = 0x8u;
  static constexpr uint32_t kFirstSpecial = 0x8u;  // none: every code is a number
  TERSE_HD static bool is_number(uint32_t) { return true; }
};

// The magnitude code (sign bit clear) of y >= 0 (not NaN) in format F, saturating at the max
// normal. Written with float operations that are exact or rounded once, so that the CPU and the
// GPU agree bit for bit and the loops vectorise:
//   k = max(floor(log2 y), kMinExponent) is y's binade (the format's subnormals share the
//   smallest normal binade's quantum), t = y * 2^(kMantissaBits - k) is exact (a power-of-two
//   scaling into [0, 2^(kMantissaBits + 1))), and n = round(t) counts quanta: the code is then
//   ((k + kBias - 1) << kMantissaBits) + n, which covers subnormals (k + kBias - 1 = 0) and a
//   round-up into the next binade (n = 2^(kMantissaBits + 1)) without a branch.
template <typename F, bool kStochastic>
TERSE_MINIFLOAT_HD uint32_t minifloat_magnitude_code(float y, float u) {
  // Selects and comparisons are on the bits (a non-negative float orders as its bits do): GCC
  // will not if-convert a float comparison under trapping math, and would not vectorise.
  const uint32_t max_bits = float_bits(F::kMaxNormal);
  uint32_t bits = float_bits(y);
  bits = bits < max_bits ? bits : max_bits;
  const int exponent = static_cast<int>(bits >> 23) - 127;
  const int k = exponent > F::kMinExponent ? exponent : F::kMinExponent;
  const float t =
      bits_float(bits) * bits_float(static_cast<uint32_t>(127 + F::kMantissaBits - k) << 23);
  int32_t n;
  if (kStochastic) {
    // t >= 0, so truncation is floor; t - floor(t) and 1 - u are exact.
    const int32_t floor_t = static_cast<int32_t>(t);
    const float fraction = t - static_cast<float>(floor_t);
    n = floor_t + (float_bits(fraction) >= float_bits(1.0f - u) ? 1 : 0);
  } else {
    // Adding and removing 2^23 rounds t (< 2^23) to an integer, ties to even, in fp32's own
    // rounding; n's parity is the mantissa's last bit.
    n = static_cast<int32_t>((t + 8388608.0f) - 8388608.0f);
  }
  return (static_cast<uint32_t>(k + F::kBias - 1) << F::kMantissaBits) + static_cast<uint32_t>(n);
}

// The value of a code of format F (a number: is_number(code)). Normal codes are rebiased into an
// fp32 exponent; subnormal ones are mantissa * 2^(kMinExponent - kMantissaBits). Both are exact,
// neither touches an fp32 subnormal (slow on x86), and the choice and the sign are made on the
// bits so that the loops vectorise (see above).
template <typename F>
TERSE_MINIFLOAT_HD float minifloat_value(uint32_t code) {
  const uint32_t magnitude = code & (F::kSignBit - 1u);
  const uint32_t normal =
      (magnitude << (23 - F::kMantissaBits)) + (static_cast<uint32_t>(127 - F::kBias) << 23);
  // A subnormal m * 2^(kMinExponent - kMantissaBits), m < 2^kMantissaBits <= 8, normalised in
  // integers: its leading bit p moves into the exponent (m = 0 stays 0). A float conversion
  // would do, but GCC will not speculate one past the branch, and would not vectorise.
  const uint32_t p = (magnitude >= 2u ? 1u : 0u) + (magnitude >= 4u ? 1u : 0u);
  const uint32_t subnormal =
      magnitude != 0
          ? ((static_cast<uint32_t>(127 + F::kMinExponent - F::kMantissaBits) + p) << 23) |
                ((magnitude << (23 - p)) & 0x7fffffu)
          : 0u;
  const uint32_t bits = (magnitude >> F::kMantissaBits) != 0 ? normal : subnormal;
  const uint32_t sign = (code & F::kSignBit) != 0 ? 0x80000000u : 0u;
  return bits_float(bits | sign);
}

template <typename F>
TERSE_MINIFLOAT_HD float minifloat_magnitude_value(uint32_t magnitude) {
  return minifloat_value<F>(magnitude);
}

// fp8 tensor elements (ncclFloat8e4m3, ncclFloat8e5m2: E4M3 and E5M2 as above) to and from
// fp32, for codecs that take fp8 input and decode into fp8 output.

// Every code, NaN and infinity included (a NaN keeps its sign; its payload is not kept).
template <typename F>
TERSE_MINIFLOAT_HD float fp8_to_float(uint32_t code) {
  const uint32_t sign = (code & F::kSignBit) != 0 ? 0x80000000u : 0u;
  const uint32_t magnitude = code & 0x7fu;
  const uint32_t special =
      sign | (magnitude == F::kInfinityCode && F::kInfinityCode != F::kNanCode ? 0x7f800000u
                                                                               : 0x7fc00000u);
  const float number = minifloat_value<F>(code);
  return bits_float(F::is_number(code) ? float_bits(number) : special);
}

// Rounded to nearest even; finite values beyond the max normal saturate to it (a finite sum
// must not become infinite, as for the 16-bit types' saturate_to); NaN stays NaN and infinity
// stays infinity (E4M3, which has none, stores NaN: still not finite).
template <typename F>
TERSE_MINIFLOAT_HD uint8_t float_to_fp8(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 31) != 0 ? F::kSignBit : 0u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  const uint32_t special = magnitude > 0x7f800000u ? F::kNanCode : F::kInfinityCode;
  const uint32_t code = magnitude >= 0x7f800000u
                            ? special
                            : minifloat_magnitude_code<F, false>(bits_float(magnitude), 0.0f);
  return static_cast<uint8_t>(sign | code);
}

// E8M0: the byte of 2^exponent for exponent in [-127, 127].
TERSE_MINIFLOAT_HD uint32_t e8m0_byte(int exponent) {
  return static_cast<uint32_t>(exponent + 127);
}
constexpr uint32_t kE8M0Nan = 0xffu;

}  // namespace terse
