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

namespace terse {

TERSE_HD uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

TERSE_HD float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

TERSE_HD float half_to_float(uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  _Float16 half;
  memcpy(&half, &bits, sizeof(half));
  return static_cast<float>(half);
#endif
}

TERSE_HD uint16_t float_to_half(float value) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(value));
#else
  _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  memcpy(&bits, &half, sizeof(bits));
  return bits;
#endif
}

TERSE_HD float bf16_to_float(uint16_t bits) {
  return bits_float(static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even; NaNs stay NaN (quiet bit forced so truncation cannot make an infinity).
TERSE_HD uint16_t float_to_bf16(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace terse
