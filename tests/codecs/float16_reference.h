// Reference fp16 and bf16 conversions for tests, written independently of common/float_convert.h:
// fp16 through the compiler's _Float16 (libgcc's soft-float conversions without -mf16c, round to
// nearest even) or, where the compiler has no _Float16 on x86 (clang before 15, which builds the
// sanitized codec tests with the fuzz targets), the processor's F16C conversions; bf16 rounding
// spelled out on the bits, and the NaN rules float_convert.h states (fp16 -> fp32 keeps the payload
// and the quiet bit as they are; fp32 -> fp16 gives the canonical quiet NaN with the sign; fp32 ->
// bf16 keeps the top 16 bits with the quiet bit set).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__clang__) && __clang_major__ < 15
#include <immintrin.h>
#define TERSE_REFERENCE_HALF_BY_F16C 1
#endif

namespace terse::testing {

#if TERSE_REFERENCE_HALF_BY_F16C
__attribute__((target("f16c"))) inline float f16c_half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) inline uint16_t f16c_float_to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
#endif

inline uint32_t reference_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float reference_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float reference_half_to_float(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) {
    return reference_float((uint32_t(h & 0x8000u) << 16) | 0x7f800000u |
                           (uint32_t(h & 0x3ffu) << 13));
  }
#if TERSE_REFERENCE_HALF_BY_F16C
  return f16c_half_to_float(h);
#else
  _Float16 v;
  memcpy(&v, &h, sizeof(h));
  return static_cast<float>(v);
#endif
}

inline uint16_t reference_float_to_half(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((std::signbit(f) ? 0x8000u : 0u) | 0x7e00u);
#if TERSE_REFERENCE_HALF_BY_F16C
  return f16c_float_to_half(f);
#else
  const _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  memcpy(&h, &v, sizeof(h));
  return h;
#endif
}

inline float reference_bf16_to_float(uint16_t b) {
  return reference_float(uint32_t(b) << 16);
}

inline uint16_t reference_float_to_bf16(float f) {
  const uint32_t bits = reference_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t upper = bits >> 16;
  const uint32_t lower = bits & 0xffffu;
  // Round to nearest, ties to the even upper half; a carry rounds into the exponent (up to
  // infinity from the largest finite binade).
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u) != 0)) ++upper;
  return static_cast<uint16_t>(upper);
}

}  // namespace terse::testing
