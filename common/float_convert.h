// fp16 and bf16 <-> fp32 conversions shared by the CPU path and the CUDA kernels. Both sides round
// to nearest even, so a codec produces the same bytes on either side.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

// TERSE_HD, forced inline on the host, for these conversions and the typed views over them
// (codecs/dtype.h): the CPU loops that call them are ISA clones (TERSE_CPU_DISPATCH), and a call
// the inliner leaves out of line runs the baseline scalar copy once per element. With five input
// types GCC stopped inlining F16::store into the cast loops, and fp16 encode fell from 12 to
// about 1 GB/s (git bisect with codec_perf: 81adda2; issue 24).
#if !defined(__CUDACC__) && defined(__GNUC__)
#define TERSE_CONVERT_HD __attribute__((always_inline)) inline
#else
#define TERSE_CONVERT_HD TERSE_HD
#endif

namespace terse {

TERSE_CONVERT_HD uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

TERSE_CONVERT_HD float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

TERSE_CONVERT_HD float half_to_float(uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  // Exact for every input, written with selects instead of branches so that CPU loops over it
  // vectorise (GCC does not vectorise scalar _Float16 loads). Rebias the exponent; infinities
  // and NaNs get the rest of the float exponent range; subnormals are renormalised by an exact
  // float subtraction.
  const uint32_t shifted_exponent = 0x7c00u << 13;
  uint32_t magnitude = (bits & 0x7fffu) << 13;
  uint32_t exponent = magnitude & shifted_exponent;
  magnitude += (127u - 15u) << 23;
  uint32_t inf_nan = magnitude + ((128u - 16u) << 23);
  float subnormal = bits_float(magnitude + (1u << 23)) - bits_float(113u << 23);
  // Masks rather than ?: because GCC keeps ?: over these as branches.
  uint32_t special = 0u - static_cast<uint32_t>(exponent == shifted_exponent);
  uint32_t tiny = 0u - static_cast<uint32_t>(exponent == 0);
  uint32_t result =
      (magnitude & ~(special | tiny)) | (inf_nan & special) | (float_bits(subnormal) & tiny);
  return bits_float(result | ((bits & 0x8000u) << 16));
#endif
}

TERSE_CONVERT_HD uint16_t float_to_half(float value) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(value));
#else
  // Round to nearest even with integer arithmetic and masks, all three cases computed and one
  // selected, so CPU loops vectorise (GCC has no vector type for _Float16 without AVX512-FP16).
  // Overflow goes to infinity and NaN to the canonical quiet NaN, as __float2half_rn does.
  uint32_t bits = float_bits(value);
  uint32_t sign = bits & 0x80000000u;
  uint32_t magnitude = bits ^ sign;
  // Normal results: rebias, then add half an ulp minus one plus the lowest kept bit (ties to
  // even) before dropping the 13 extra mantissa bits.
  uint32_t normal = (magnitude + ((15u - 127u) << 23) + 0xfffu + ((magnitude >> 13) & 1u)) >> 13;
  // Subnormal results: adding a magic float lets the FPU do the rounding at the right place.
  const float denormal_magic = bits_float(((127u - 15u) + (23u - 10u) + 1u) << 23);
  uint32_t subnormal =
      float_bits(bits_float(magnitude) + denormal_magic) - float_bits(denormal_magic);
  uint32_t overflow = 0x7c00u | (0x0200u & (0u - static_cast<uint32_t>(magnitude > 0x7f800000u)));
  uint32_t is_overflow = 0u - static_cast<uint32_t>(magnitude >= ((127u + 16u) << 23));
  uint32_t is_subnormal = 0u - static_cast<uint32_t>(magnitude < (113u << 23));
  uint32_t result = (overflow & is_overflow) | (subnormal & is_subnormal) |
                    (normal & ~(is_overflow | is_subnormal));
  return static_cast<uint16_t>(result | (sign >> 16));
#endif
}

TERSE_CONVERT_HD float bf16_to_float(uint16_t bits) {
  return bits_float(static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even; NaNs stay NaN (quiet bit forced so truncation cannot make an infinity).
TERSE_CONVERT_HD uint16_t float_to_bf16(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace terse
