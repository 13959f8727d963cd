// AVX-512 encoders of the block-scaled codecs on fp32 values: block_scaled_avx2.h's encoders
// with the per-element work in 16 lanes, preferred where the CPU has AVX-512 (F, BW, DQ, VL).
//
// Why: per element the encoders are instruction-bound, not memory-bound, once stochastic
// rounding (two integer hashes per element) or nvfp4's division is in them: the AVX2 kernels ran
// those at 0.25-0.45x memcpy on a Zen 5, where 512-bit instructions cost what 256-bit ones do.
// Twice the lanes, 32 registers (the AVX2 stochastic loop spills) and mask compares roughly
// halve the instructions. The decoders stay AVX2: they already outrun memcpy.
//
// Bit-exact for the same reasons as the AVX2 kernels: the same fp32 operations in the same
// order per lane, the group-level scale math shared with them (block_scaled_avx2.h's helpers,
// AVX2 being a subset of what these functions are compiled for).
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/block_scaled_avx2.h"
#include "codecs/rounding_random_lanes.h"

#if TERSE_BLOCK_SCALED_AVX2

#define TERSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define TERSE_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"), always_inline)) inline

// GCC 12's AVX-512 intrinsics set off -Wmaybe-uninitialized on their own placeholder operand
// (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace terse {
namespace block_scaled_avx512 {

using block_scaled_avx2::GroupScales;
using block_scaled_avx2::kGroup;

inline bool available() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
}

TERSE_AVX512_INLINE __m512i splat(uint32_t v) {
  return _mm512_set1_epi32(static_cast<int>(v));
}

TERSE_AVX512_INLINE __m512i magnitude_bits(__m512 v) {
  return _mm512_and_si512(_mm512_castps_si512(v), splat(0x7fffffffu));
}

// The max |x| bits of each of a group's 8 blocks, one per lane (block_scaled_avx2::group_max):
// each block folded to 8 lanes, then the AVX2 transposing reduction.
template <uint32_t kBlock>
TERSE_AVX512_INLINE __m256i group_max(const float* x) {
  __m256i m[kGroup];
  for (size_t b = 0; b < kGroup; ++b) {
    __m512i lanes = magnitude_bits(_mm512_loadu_ps(x + b * kBlock));
    for (uint32_t j = 16; j < kBlock; j += 16) {
      lanes = _mm512_max_epu32(lanes, magnitude_bits(_mm512_loadu_ps(x + b * kBlock + j)));
    }
    m[b] = _mm256_max_epu32(_mm512_castsi512_si256(lanes), _mm512_extracti64x4_epi64(lanes, 1));
  }
  return block_scaled_avx2::transpose_max(m);
}

// ---- Element conversion on 16 lanes: block_scaled_avx2.h's functions (which say why each
// step is the generic code's), written for 512-bit registers and mask compares.

template <typename F, bool kStochastic>
TERSE_AVX512_INLINE __m512i magnitude_code(__m512 y, __m512i random24) {
  const __m512i bits = _mm512_min_epu32(_mm512_castps_si512(y), splat(float_bits(F::kMaxNormal)));
  const __m512i k = _mm512_max_epi32(_mm512_and_si512(bits, splat(0x7f800000u)),
                                     splat(static_cast<uint32_t>(127 + F::kMinExponent) << 23));
  __m512i n;
  if (kStochastic) {
    // floor((floor(t * 2^24) + random24) / 2^24), as block_scaled_avx2::magnitude_code says.
    const __m512 factor = _mm512_castsi512_ps(
        _mm512_sub_epi32(splat(static_cast<uint32_t>(254 + F::kMantissaBits + 24) << 23), k));
    const __m512i t24 = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(bits), factor));
    n = _mm512_srli_epi32(_mm512_add_epi32(t24, random24), 24);
  } else {
    // vcvtps2dq without embedded rounding: MXCSR's mode, as the AVX2 kernel.
    (void)random24;
    const __m512 factor = _mm512_castsi512_ps(
        _mm512_sub_epi32(splat(static_cast<uint32_t>(254 + F::kMantissaBits) << 23), k));
    n = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(bits), factor));
  }
  return _mm512_add_epi32(_mm512_add_epi32(_mm512_srli_epi32(k, 23 - F::kMantissaBits), n),
                          splat(static_cast<uint32_t>(F::kBias - 128) << F::kMantissaBits));
}

template <typename F>
TERSE_AVX512_INLINE __m512i sign_code(__m512 v) {
  return _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 32 - F::kBits),
                          splat(F::kSignBit));
}

template <typename F>
TERSE_AVX512_INLINE __m512 minifloat_values(__m512i code) {
  const __m512i magnitude = _mm512_and_si512(code, splat(F::kSignBit - 1u));
  const __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(magnitude, 23 - F::kMantissaBits),
                                          splat(static_cast<uint32_t>(127 - F::kBias) << 23));
  const __m512 subnormal = _mm512_mul_ps(
      _mm512_cvtepi32_ps(magnitude),
      _mm512_set1_ps(
          bits_float(static_cast<uint32_t>(127 + F::kMinExponent - F::kMantissaBits) << 23)));
  const __mmask16 is_normal =
      _mm512_cmpgt_epi32_mask(magnitude, splat((1u << F::kMantissaBits) - 1u));
  const __m512 value = _mm512_mask_blend_ps(is_normal, subnormal, _mm512_castsi512_ps(normal));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(code, splat(F::kSignBit)), 32 - F::kBits);
  return _mm512_or_ps(value, _mm512_castsi512_ps(sign));
}

// minifloat_value<E2M1>(code) for all 16 codes, signs included: scaled per block into the
// table that decodes its codes (vpermps on 16 entries), each entry computed as the generic
// value(code) * scale is.
TERSE_AVX512_INLINE __m512 e2m1_values() {
  alignas(64) float values[16];
  for (uint32_t code = 0; code < 16; ++code) values[code] = minifloat_value<E2M1>(code);
  return _mm512_load_ps(values);
}

// ---- Encoders: block_scaled_avx2::mx_encode and nv_encode on 16 lanes per vector.

// What the lanes of one vector need of their block (block_scaled_avx2::BlockVectors).
struct BlockVectors {
  __m512 param;
  __m512 high;
  __m512 low;
  __m512 table;  // 4-bit, for the error: the block's 16 decoded codes
};

// One 32-element chunk: vector 0 belongs to block `a`, vector 1 to block `b`.
template <typename F, bool kStochastic, bool kError, bool kNv>
TERSE_AVX512_INLINE void encode_chunk(const float* x, const BlockVectors& a, const BlockVectors& b,
                                      uint32_t index_low, uint32_t index_high, RoundingKey key,
                                      uint8_t* codes, float* error) {
  const uint32_t middle = kStochastic ? rounding_lanes_middle(key, index_high) : 0u;
  for (int v = 0; v < 2; ++v) {
    const BlockVectors& block = v == 0 ? a : b;
    const __m512 value = _mm512_loadu_ps(x + 16 * v);
    const __m512 magnitude = _mm512_castsi512_ps(magnitude_bits(value));
    const __m512i random24 = kStochastic ? rounding_bits24_x16(key, index_low + 16u * v, middle)
                                         : _mm512_setzero_si512();
    // nvfp4's division is kept (its rounded quotient is the format's); a multiply by fl(1 / D)
    // with a division only where the product could round to another code measured slower.
    const __m512 y =
        kNv ? _mm512_div_ps(magnitude, block.param) : _mm512_mul_ps(magnitude, block.param);
    __m512i code = magnitude_code<F, kStochastic>(y, random24);
    code = _mm512_or_si512(code, sign_code<F>(value));
    if (kError) {
      const __m512 decoded =
          F::kBits == 4
              ? _mm512_permutexvar_ps(code, block.table)
              : _mm512_mul_ps(_mm512_mul_ps(minifloat_values<F>(code), block.high), block.low);
      _mm512_storeu_ps(error + 16 * v, _mm512_sub_ps(value, decoded));
    }
    if (F::kBits == 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16 * v), _mm512_cvtepi32_epi8(code));
    } else {
      // Codes 2j and 2j + 1 share a 64-bit lane: the odd one shifted down by 28 lands in bits
      // 4..7 of the even one's byte, which vpmovqb keeps.
      const __m512i pairs = _mm512_or_si512(code, _mm512_srli_epi64(code, 28));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + 8 * v), _mm512_cvtepi64_epi8(pairs));
    }
  }
}

template <typename F, bool kStochastic, bool kError>
TERSE_AVX512 size_t mx_encode(const float* input, size_t begin, size_t end, RoundingKey key,
                              uint8_t* scales, uint8_t* codes, float* error) {
  // Software-pipelined as nv_encode below.
  if (begin == end) return end;
  GroupScales scales_of[2];
  if (block_scaled_avx2::any_not_finite(group_max<kMxBlock>(input))) {
    return begin;
  }
  block_scaled_avx2::mx_group_scales<F, kError>(group_max<kMxBlock>(input), scales + begin,
                                                &scales_of[0]);
  int current = 0;
  for (size_t group = begin; group < end; group += kGroup, current ^= 1) {
    const float* x = input + (group - begin) * kMxBlock;
    bool next_finite = true;
    if (group + kGroup < end) {
      const __m256i amax = group_max<kMxBlock>(x + kGroup * kMxBlock);
      next_finite = !block_scaled_avx2::any_not_finite(amax);
      if (next_finite) {
        block_scaled_avx2::mx_group_scales<F, kError>(amax, scales + group + kGroup,
                                                      &scales_of[current ^ 1]);
      }
    }
    const GroupScales& s = scales_of[current];
    for (size_t b = 0; b < kGroup; ++b) {
      const size_t first = (group + b) * kMxBlock;
      BlockVectors block;
      block.param = _mm512_set1_ps(s.param[b]);
      if (kError) {
        block.high = _mm512_set1_ps(s.high[b]);
        block.low = _mm512_set1_ps(s.low[b]);
        block.table = _mm512_mul_ps(_mm512_mul_ps(e2m1_values(), block.high), block.low);
      }
      encode_chunk<F, kStochastic, kError, false>(
          x + b * kMxBlock, block, block, static_cast<uint32_t>(first),
          static_cast<uint32_t>(first >> 32), key, codes + first * F::kBits / 8,
          kError ? error + first : nullptr);
    }
    if (!next_finite) return group + kGroup;
  }
  return end;
}

template <bool kStochastic, bool kError>
TERSE_AVX512 size_t nv_encode(const float* input, size_t begin, size_t end, float tensor_scale,
                              RoundingKey key, uint8_t* scales, uint8_t* codes, float* error) {
  // Software-pipelined: the next group's maxima and scales (a long dependency chain) are
  // computed before this group's elements, so that they overlap.
  if (begin == end) return end;
  GroupScales scales_of[2];
  if (block_scaled_avx2::any_not_finite(group_max<kNvBlock>(input))) {
    return begin;
  }
  block_scaled_avx2::nv_group_scales(group_max<kNvBlock>(input), tensor_scale, scales + begin,
                                     &scales_of[0]);
  int current = 0;
  for (size_t group = begin; group < end; group += kGroup, current ^= 1) {
    const float* x = input + (group - begin) * kNvBlock;
    bool next_finite = true;
    if (group + kGroup < end) {
      const __m256i amax = group_max<kNvBlock>(x + kGroup * kNvBlock);
      next_finite = !block_scaled_avx2::any_not_finite(amax);
      if (next_finite) {
        block_scaled_avx2::nv_group_scales(amax, tensor_scale, scales + group + kGroup,
                                           &scales_of[current ^ 1]);
      }
    }
    const GroupScales& s = scales_of[current];
    for (size_t b = 0; b < kGroup; b += 2) {
      const size_t first = (group + b) * kNvBlock;
      BlockVectors pair[2];
      for (int k = 0; k < 2; ++k) {
        pair[k].param = _mm512_set1_ps(s.param[b + k]);
        if (kError) pair[k].table = _mm512_mul_ps(e2m1_values(), _mm512_set1_ps(s.high[b + k]));
      }
      encode_chunk<E2M1, kStochastic, kError, true>(
          x + b * kNvBlock, pair[0], pair[1], static_cast<uint32_t>(first),
          static_cast<uint32_t>(first >> 32), key, codes + first / 2,
          kError ? error + first : nullptr);
    }
    if (!next_finite) return group + kGroup;
  }
  return end;
}

}  // namespace block_scaled_avx512
}  // namespace terse

#pragma GCC diagnostic pop

#endif  // TERSE_BLOCK_SCALED_AVX2
