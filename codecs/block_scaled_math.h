// Math of the block-scaled codecs mxfp8, mxfp4 and nvfp4 (block_scaled_codecs.cpp documents the
// formats and the wire), shared by the CPU loops and the CUDA kernels
// (cuda/block_scaled_kernels.cu) so that both sides write the same bytes: the payload layout,
// each block's scale, the per-element conversion and its inverse, and the checks a decoder makes.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "codecs/minifloat.h"
#include "common/float_convert.h"
#include "common/host_device.h"

namespace terse {

enum class BlockScaledKind : uint8_t { kMxfp8, kMxfp4, kNvfp4 };

// Header flags (WireHeader::flags).
constexpr uint8_t kBlockScaledE5M2Flag = 1;        // mxfp8 only: E5M2 elements instead of E4M3
constexpr uint8_t kBlockScaledStochasticFlag = 2;  // informational: decoding does not depend on it

constexpr uint32_t kMxBlock = 32;  // elements per E8M0 scale (OCP MX v1.0)
constexpr uint32_t kNvBlock = 16;  // elements per E4M3 scale (NVFP4)
// NVFP4's per-tensor scale maps the tensor's max |x| to the largest product of an E4M3 block
// scale (448) and an E2M1 element (6).
constexpr float kNvTensorRange = 448.0f * 6.0f;

// Payload after the header: one scale byte per block, then the element codes, 8-bit ones one
// per byte, 4-bit ones two per byte (element 2j in the low nibble of byte j, 2j + 1 in the high
// one; the high nibble of an odd count's last byte is zero).
struct BlockScaledLayout {
  size_t blocks;
  size_t codes;  // byte offset of the codes
  size_t bytes;  // payload size
};

TERSE_MINIFLOAT_HD BlockScaledLayout block_scaled_layout(size_t count, uint32_t block, int bits) {
  BlockScaledLayout layout;
  layout.blocks = (count + block - 1) / block;
  layout.codes = layout.blocks;
  layout.bytes = layout.codes + (bits == 8 ? count : (count + 1) / 2);
  return layout;
}

TERSE_MINIFLOAT_HD bool block_scaled_is_finite(float v) {
  return v <= FLT_MAX && v >= -FLT_MAX;  // false for NaN too
}

// max(m, |v|) that keeps a NaN once one is seen, so a NaN anywhere marks its block. On the bits:
// magnitudes order as their bits do, NaNs above infinity, and an integer max vectorises where a
// float comparison under trapping math does not.
TERSE_MINIFLOAT_HD float block_scaled_amax(float m, float v) {
  const uint32_t a = float_bits(v) & 0x7fffffffu;
  const uint32_t b = float_bits(m);
  return bits_float(a > b ? a : b);
}

// ---- MX (mxfp8, mxfp4): an E8M0 scale 2^e per block of 32, e = floor(log2 amax) - emax_elem.

// The shared exponent of a block whose max |x| is `amax` (finite): OCP MX v1.0 section 6.3,
// clamped below at E8M0's smallest, 2^-127. An amax of zero or an fp32 subnormal gets -127
// too (floor(log2 amax) <= -127 there), as the OCP reference code does.
template <typename F>
TERSE_MINIFLOAT_HD int mx_scale_exponent(float amax) {
  const int e = static_cast<int>(float_bits(amax) >> 23) - 127 - F::kMaxExponent;
  return e > -127 ? e : -127;
}

// The largest exponent an encoder writes for format F (amax < 2^128); a decoder refuses larger
// ones, which is also where max normal * 2^e would leave fp32's range.
template <typename F>
TERSE_MINIFLOAT_HD int mx_max_exponent() {
  return 127 - F::kMaxExponent;
}

// 2^-e, the encoder's exact scaling of x into element units; normal for every e it writes.
TERSE_MINIFLOAT_HD float mx_inverse_scale(int e) {
  return bits_float(static_cast<uint32_t>(127 - e) << 23);
}

// 2^e as two normal factors (2^-127 itself is an fp32 subnormal, slow as an x86 operand): the
// decoded value is (element * high) * low, each product exact.
struct MxDecodeScale {
  float high;
  float low;
};

TERSE_MINIFLOAT_HD MxDecodeScale mx_decode_scale(int e) {
  if (e < -63)
    return MxDecodeScale{bits_float(static_cast<uint32_t>(127 + e + 64) << 23), 0x1p-64f};
  return MxDecodeScale{bits_float(static_cast<uint32_t>(127 + e) << 23), 1.0f};
}

// The code of element x (finite) of a block with inverse scale `inverse`: sign bit of x, then
// the saturating, rounded magnitude of |x| * 2^-e (exact).
template <typename F, bool kStochastic>
TERSE_MINIFLOAT_HD uint32_t mx_element_code(float x, float inverse, float u) {
  const uint32_t sign = (float_bits(x) >> 31) != 0 ? F::kSignBit : 0u;
  return sign | minifloat_magnitude_code<F, kStochastic>(fabsf(x) * inverse, u);
}

template <typename F>
TERSE_MINIFLOAT_HD float mx_element_value(uint32_t code, MxDecodeScale scale) {
  return minifloat_value<F>(code) * scale.high * scale.low;
}

// ---- NVFP4: E2M1 elements, an E4M3 scale per block of 16, an fp32 scale per tensor.
//   s_t = amax_tensor / 2688 (fp32 division), stepped down until 6 * (448 * s_t) is finite;
//   a block's scale code is E4M3(amax_block / (6 * s_t)) rounded to nearest, saturating, and
//   its decode scale D = value(scale code) * s_t (fp32); elements are E2M1(|x| / D) (fp32
//   division), x^ = value(element) * D. s_t = 0 or D = 0 encode every element as a zero.

// The per-tensor scale of a tensor whose max |x| is `amax` (NaN when amax is not finite).
TERSE_MINIFLOAT_HD float nv_tensor_scale(float amax) {
  if (!block_scaled_is_finite(amax)) return bits_float(0x7fc00000u);
  float scale = amax / kNvTensorRange;
  while (!block_scaled_is_finite(6.0f * (448.0f * scale))) {
    scale = bits_float(float_bits(scale) - 1u);
  }
  return scale;
}

// Whether a received tensor scale is one an encoder writes for finite input: finite, sign clear,
// and every element * block scale product finite.
TERSE_MINIFLOAT_HD bool nv_tensor_scale_is_valid(float scale) {
  return (float_bits(scale) >> 31) == 0 && block_scaled_is_finite(scale) &&
         block_scaled_is_finite(6.0f * (448.0f * scale));
}

// The E4M3 scale code of a block whose max |x| is `amax` (finite), under tensor scale s_t.
TERSE_MINIFLOAT_HD uint32_t nv_block_scale_code(float amax, float tensor_scale) {
  if (tensor_scale == 0.0f) return 0u;
  return minifloat_magnitude_code<E4M3, false>(amax / (6.0f * tensor_scale), 0.0f);
}

// A received block scale code is a non-negative E4M3 number.
TERSE_MINIFLOAT_HD bool nv_block_scale_is_valid(uint32_t code) {
  return (code & E4M3::kSignBit) == 0 && E4M3::is_number(code);
}

TERSE_MINIFLOAT_HD float nv_decode_scale(uint32_t scale_code, float tensor_scale) {
  return minifloat_magnitude_value<E4M3>(scale_code) * tensor_scale;
}

// What a block's elements are converted with: the divisor D, or 1 with every magnitude masked
// to 0 when D is 0 (so that the per-element code has no branch).
struct NvBlockDivisor {
  float divisor;
  uint32_t keep;  // magnitude mask: 0xF, or 0 when D = 0
};

TERSE_MINIFLOAT_HD NvBlockDivisor nv_block_divisor(float decode_scale) {
  const bool zero = decode_scale == 0.0f;
  return NvBlockDivisor{zero ? 1.0f : decode_scale, zero ? 0u : 0xfu};
}

template <bool kStochastic>
TERSE_MINIFLOAT_HD uint32_t nv_element_code(float x, NvBlockDivisor block, float u) {
  const uint32_t sign = (float_bits(x) >> 31) != 0 ? E2M1::kSignBit : 0u;
  return sign |
         (minifloat_magnitude_code<E2M1, kStochastic>(fabsf(x) / block.divisor, u) & block.keep);
}

TERSE_MINIFLOAT_HD float nv_element_value(uint32_t code, float decode_scale) {
  return minifloat_value<E2M1>(code) * decode_scale;
}

}  // namespace terse
