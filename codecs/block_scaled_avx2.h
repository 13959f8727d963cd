// AVX2 kernels of the block-scaled codecs (mxfp8, mxfp4, nvfp4) on fp32 values, used by the
// CPU loops of block_scaled_cpu.h on groups of 8 whole blocks (256 elements for MX, 128 for
// nvfp4) when the CPU has AVX2: an fp32 tensor's own elements, or a tile of another type's
// converted to fp32 (dtype_convert.h); the rest (the last partial group, a group holding a NaN
// or infinity) runs the generic loops there.
//
// Why a hand-written path: the generic loops convert one block per iteration, and GCC's
// vectoriser leaves each block's max reduction, scale derivation, byte packing and nibble
// (un)packing scalar or spilled; at 16 or 32 elements per block that overhead, not the
// per-element arithmetic, set the speed (0.1-0.4x memcpy). Here 8 blocks' maxima are reduced
// together (one transpose of 8 vectors), their scales derived in the lanes of one vector, codes
// packed with pack/maddubs instructions, and 4-bit codes decoded through an 8-entry table
// (vpermps) built per block.
//
// Bit-exact with the generic path (and so with the CUDA kernels): every lane performs the very
// fp32 operations, in the same order, that block_scaled_math.h and minifloat.h write (IEEE
// arithmetic is deterministic; AVX2 lanes and scalar SSE obey the same MXCSR), and the integer
// steps compute the same bits. The few rewritings are noted where they are made; the
// bit-exact tests against the specification reference run this path on any AVX2 machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codecs/block_scaled_math.h"
#include "codecs/minifloat.h"
#include "codecs/rounding_random.h"
#include "codecs/rounding_random_lanes.h"

#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(TERSE_NO_CLONES)
#define TERSE_BLOCK_SCALED_AVX2 1
#include <immintrin.h>
#else
#define TERSE_BLOCK_SCALED_AVX2 0
#endif

#if TERSE_BLOCK_SCALED_AVX2

// Kernels are compiled for AVX2 whatever the build's baseline; helpers are forced inline so
// that they are too.
#define TERSE_AVX2 __attribute__((target("avx2")))
#define TERSE_AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline

namespace terse {
namespace block_scaled_avx2 {

// Blocks per kernel iteration: one vector lane per block for the max and scale steps.
constexpr size_t kGroup = 8;

inline bool available() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

TERSE_AVX2_INLINE __m256i splat(uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}

TERSE_AVX2_INLINE __m256i magnitude_bits(__m256 v) {
  return _mm256_and_si256(_mm256_castps_si256(v), splat(0x7fffffffu));
}

// ---- Block maxima. The generic path's max |x| is the unsigned max of the magnitude bits
// (block_scaled_amax), NaN above infinity above every number: the same here.

template <uint32_t kBlock>
TERSE_AVX2_INLINE __m256i block_lanes_max(const float* x) {
  __m256i m = magnitude_bits(_mm256_loadu_ps(x));
  for (uint32_t j = 8; j < kBlock; j += 8) {
    m = _mm256_max_epu32(m, magnitude_bits(_mm256_loadu_ps(x + j)));
  }
  return m;
}

// Per 128-bit half: [max(a0, a2), max(b0, b2), max(a1, a3), max(b1, b3)].
TERSE_AVX2_INLINE __m256i max_pairs(__m256i a, __m256i b) {
  return _mm256_max_epu32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

// Per 128-bit half, from max_pairs(a, b) and max_pairs(c, d): [max a, max b, max c, max d].
TERSE_AVX2_INLINE __m256i max_quads(__m256i ab, __m256i cd) {
  return _mm256_max_epu32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

// Lane i: the max over the 8 lanes of m[i] (a transposing reduction, 21 instructions for 8).
TERSE_AVX2_INLINE __m256i transpose_max(const __m256i m[kGroup]) {
  const __m256i q0 = max_quads(max_pairs(m[0], m[1]), max_pairs(m[2], m[3]));
  const __m256i q1 = max_quads(max_pairs(m[4], m[5]), max_pairs(m[6], m[7]));
  return _mm256_max_epu32(_mm256_permute2x128_si256(q0, q1, 0x20),
                          _mm256_permute2x128_si256(q0, q1, 0x31));
}

// The max |x| bits of each of a group's 8 blocks of kBlock elements, one per lane.
template <uint32_t kBlock>
TERSE_AVX2_INLINE __m256i group_max(const float* x) {
  __m256i m[kGroup];
  for (size_t b = 0; b < kGroup; ++b) m[b] = block_lanes_max<kBlock>(x + b * kBlock);
  return transpose_max(m);
}

// Whether any lane holds the bits of a NaN or an infinity (magnitude bits, so signed compare).
TERSE_AVX2_INLINE bool any_not_finite(__m256i magnitude) {
  return _mm256_movemask_epi8(_mm256_cmpgt_epi32(magnitude, splat(0x7f7fffffu))) != 0;
}

// The low bytes of the 8 lanes (each < 256) to out[0..7].
TERSE_AVX2_INLINE void store_lane_bytes(__m256i v, uint8_t* out) {
  const __m256i words = _mm256_packus_epi32(v, v);
  const __m256i bytes = _mm256_packus_epi16(words, words);
  const uint32_t low = static_cast<uint32_t>(_mm256_cvtsi256_si32(bytes));
  const uint32_t high = static_cast<uint32_t>(_mm256_extract_epi32(bytes, 4));
  memcpy(out, &low, 4);
  memcpy(out + 4, &high, 4);
}

// ---- Element conversion: minifloat.h's functions on 8 lanes.

// minifloat_magnitude_code<F, kStochastic>(y, u) for y >= 0 (not NaN) in each lane; for
// stochastic rounding, `random24` holds the 24 random bits r of each lane's u = r * 2^-24
// (rounding_random_lanes.h).
template <typename F, bool kStochastic>
TERSE_AVX2_INLINE __m256i magnitude_code(__m256 y, __m256i random24) {
  const __m256i bits = _mm256_min_epu32(_mm256_castps_si256(y), splat(float_bits(F::kMaxNormal)));
  // k + 127 in the exponent field (bits 23..30), at least the smallest normal's: y's sign bit is
  // clear, so the field is bits >> 23 as in the generic code.
  const __m256i k = _mm256_max_epi32(_mm256_and_si256(bits, splat(0x7f800000u)),
                                     splat(static_cast<uint32_t>(127 + F::kMinExponent) << 23));
  __m256i n;
  if (kStochastic) {
    // The generic code's n = floor(t) + (frac(t) >= 1 - u) in integers: with T = floor(t * 2^24)
    // = floor(t) * 2^24 + floor(frac(t) * 2^24), frac(t) >= 1 - r * 2^-24 holds exactly when
    // floor(frac(t) * 2^24) >= 2^24 - r (an integer bound), so n = (T + r) >> 24. t * 2^24 =
    // y * 2^(kMantissaBits - k + 24) is one exact product (a power-of-two scaling, below 2^28),
    // and truncation is floor for t >= 0; where the generic t underflows to an fp32 subnormal
    // (< 2^-126), both round down (T = 0, and frac(t) < 2^-24 <= 1 - u).
    const __m256 factor = _mm256_castsi256_ps(
        _mm256_sub_epi32(splat(static_cast<uint32_t>(254 + F::kMantissaBits + 24) << 23), k));
    const __m256i t24 = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(bits), factor));
    n = _mm256_srli_epi32(_mm256_add_epi32(t24, random24), 24);
  } else {
    // t = y * 2^(kMantissaBits - k): its biased exponent 127 + kMantissaBits - k is
    // (254 + kMantissaBits) minus k's field. cvtps2dq rounds under MXCSR as the generic
    // (t + 2^23) - 2^23 does (t < 2^23): to nearest even by default, and alike under every other
    // mode.
    (void)random24;
    const __m256 factor = _mm256_castsi256_ps(
        _mm256_sub_epi32(splat(static_cast<uint32_t>(254 + F::kMantissaBits) << 23), k));
    n = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(bits), factor));
  }
  // ((k + bias - 1) << M) + n, with k's field = (k + 127) << 23.
  return _mm256_add_epi32(_mm256_add_epi32(_mm256_srli_epi32(k, 23 - F::kMantissaBits), n),
                          splat(static_cast<uint32_t>(F::kBias - 128) << F::kMantissaBits));
}

// The sign bit of each lane's float, moved to F's sign bit.
template <typename F>
TERSE_AVX2_INLINE __m256i sign_code(__m256 v) {
  return _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 32 - F::kBits),
                          splat(F::kSignBit));
}

// minifloat_value<F>(code) for 8-bit formats. The subnormal m * 2^(kMinExponent - M) is an
// exact int-to-float conversion and product here (the generic code normalises in integers
// instead, for GCC's sake): the same value, so the same bits.
template <typename F>
TERSE_AVX2_INLINE __m256 minifloat_values(__m256i code) {
  const __m256i magnitude = _mm256_and_si256(code, splat(F::kSignBit - 1u));
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(magnitude, 23 - F::kMantissaBits),
                                          splat(static_cast<uint32_t>(127 - F::kBias) << 23));
  const __m256 subnormal = _mm256_mul_ps(
      _mm256_cvtepi32_ps(magnitude),
      _mm256_set1_ps(
          bits_float(static_cast<uint32_t>(127 + F::kMinExponent - F::kMantissaBits) << 23)));
  const __m256i is_normal = _mm256_cmpgt_epi32(magnitude, splat((1u << F::kMantissaBits) - 1u));
  const __m256 value =
      _mm256_blendv_ps(subnormal, _mm256_castsi256_ps(normal), _mm256_castsi256_ps(is_normal));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, splat(F::kSignBit)), 32 - F::kBits);
  return _mm256_or_ps(value, _mm256_castsi256_ps(sign));
}

// E2M1's 8 magnitudes, minifloat_value<E2M1>(m) for m = 0..7, to be scaled into a per-block
// table: a 4-bit code decodes as table[code & 7] with the sign bit set. Exact: the generic
// (-v) * s equals -(v * s) under every rounding to nearest, and the table's entries are >= +0.
TERSE_AVX2_INLINE __m256 e2m1_magnitudes() {
  return _mm256_setr_ps(minifloat_value<E2M1>(0), minifloat_value<E2M1>(1),
                        minifloat_value<E2M1>(2), minifloat_value<E2M1>(3),
                        minifloat_value<E2M1>(4), minifloat_value<E2M1>(5),
                        minifloat_value<E2M1>(6), minifloat_value<E2M1>(7));
}

TERSE_AVX2_INLINE __m256 e2m1_lookup(__m256 table, __m256i code) {
  // vpermps reads only the low 3 bits of each index: the magnitude.
  const __m256 magnitude = _mm256_permutevar8x32_ps(table, code);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, splat(E2M1::kSignBit)), 28);
  return _mm256_or_ps(magnitude, _mm256_castsi256_ps(sign));
}

// ---- Packing. 32 codes (4 vectors of lanes < 256) into 32 bytes in element order.
TERSE_AVX2_INLINE __m256i pack_bytes(__m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  // Packing works within 128-bit halves: dword d of the result holds 4 codes of vector d % 4,
  // from its low (d < 4) or high half; the permute restores element order.
  const __m256i bytes =
      _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 32 4-bit codes, one per byte, into 16 bytes: c[2j] | c[2j + 1] << 4 as c[2j] + 16 c[2j + 1].
TERSE_AVX2_INLINE __m128i pack_nibbles(__m256i bytes) {
  const __m256i pairs = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
  return _mm_packus_epi16(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
}

// The inverse: 16 packed bytes into 32 codes, one per byte, element order.
TERSE_AVX2_INLINE void unpack_nibbles(__m128i packed, __m128i* low16, __m128i* high16) {
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i even = _mm_and_si128(packed, mask);
  const __m128i odd = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
  *low16 = _mm_unpacklo_epi8(even, odd);
  *high16 = _mm_unpackhi_epi8(even, odd);
}

// Bytes 8h..8h+7 of v as 8 lanes.
TERSE_AVX2_INLINE __m256i widen8(__m128i v, int h) {
  return _mm256_cvtepu8_epi32(h == 0 ? v : _mm_srli_si128(v, 8));
}

// ---- Encoders. Each takes the block range [begin, end) (multiples of kGroup), encodes group
// after group, and returns the first block of the first group that holds a NaN or infinity (the
// caller's generic loop encodes and marks that group), or end. `input` holds the elements of
// those blocks, from block begin's first (the tensor's own, or a converted tile of them);
// `scales` and `codes` point at the payload's; `error` is the error output (kError), indexed like
// the tensor.

// What the lanes of one vector need of their block.
struct BlockVectors {
  __m256 param;  // MX: the inverse scale 2^-e; nvfp4: the divisor (nv_group_scales)
  __m256 high;   // MX 8-bit, for the error: mx_decode_scale's factors
  __m256 low;
  __m256 table;  // 4-bit, for the error: the block's decoded magnitudes
};

// One 32-element chunk: codes, packed and stored, and errors. Vectors 0 and 1 belong to block
// `a`, 2 and 3 to block `b` (the same block for MX's 32). kNv: y = |x| / divisor (nvfp4's
// division, kept: its rounded quotient is the format's), else y = |x| * 2^-e (MX).
template <typename F, bool kStochastic, bool kError, bool kNv>
TERSE_AVX2_INLINE void encode_chunk(const float* x, const BlockVectors& a, const BlockVectors& b,
                                    uint32_t index_low, uint32_t index_high, RoundingKey key,
                                    uint8_t* codes, float* error) {
  const uint32_t middle = kStochastic ? rounding_lanes_middle(key, index_high) : 0u;
  __m256i c[4];
  for (int v = 0; v < 4; ++v) {
    const BlockVectors& block = v < 2 ? a : b;
    const __m256 value = _mm256_loadu_ps(x + 8 * v);
    const __m256 magnitude = _mm256_castsi256_ps(magnitude_bits(value));
    const __m256 y =
        kNv ? _mm256_div_ps(magnitude, block.param) : _mm256_mul_ps(magnitude, block.param);
    const __m256i random24 =
        kStochastic ? rounding_bits24(key, index_low + 8u * v, middle) : _mm256_setzero_si256();
    __m256i code = magnitude_code<F, kStochastic>(y, random24);
    c[v] = _mm256_or_si256(code, sign_code<F>(value));
    if (kError) {
      // error = x - decoded, decoded as mx_element_value / nv_element_value compute it.
      const __m256 decoded =
          F::kBits == 4
              ? e2m1_lookup(block.table, c[v])
              : _mm256_mul_ps(_mm256_mul_ps(minifloat_values<F>(c[v]), block.high), block.low);
      _mm256_storeu_ps(error + 8 * v, _mm256_sub_ps(value, decoded));
    }
  }
  const __m256i bytes = pack_bytes(c[0], c[1], c[2], c[3]);
  if (F::kBits == 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), bytes);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), pack_nibbles(bytes));
  }
}

// mx_decode_scale of 8 E8M0 bytes (e = byte - 127): 2^e as 2^(e + 64) * 2^-64 when e < -63,
// else 2^e * 1.
TERSE_AVX2_INLINE void mx_decode_scales(__m256i scale, __m256* high, __m256* low) {
  const __m256i split = _mm256_cmpgt_epi32(splat(64), scale);
  *high = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(scale, _mm256_and_si256(split, splat(64))), 23));
  *low =
      _mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(0x1p-64f), _mm256_castsi256_ps(split));
}

// A group's per-block parameters, one lane per block, stored for broadcasting.
struct GroupScales {
  alignas(32) float param[kGroup];  // MX: the inverse scale 2^-e; nvfp4: the divisor
  alignas(32) float high[kGroup];   // MX: mx_decode_scale's factors; nvfp4: the decode scale D
  alignas(32) float low[kGroup];
};

// MX: the E8M0 bytes of a group whose max |x| bits (finite) are `amax`, to scale_bytes, and the
// blocks' parameters (high and low only for the error).
template <typename F, bool kError>
TERSE_AVX2_INLINE void mx_group_scales(__m256i amax, uint8_t* scale_bytes, GroupScales* s) {
  // mx_scale_exponent: e = (amax's exponent field) - 127 - emax, at least -127; the E8M0 byte
  // is e + 127.
  const __m256i scale =
      _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(amax, 23), splat(F::kMaxExponent)),
                       _mm256_setzero_si256());
  store_lane_bytes(scale, scale_bytes);
  // mx_inverse_scale: 2^-e, whose biased exponent 127 - e is 254 - byte.
  _mm256_store_ps(s->param,
                  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(splat(254), scale), 23)));
  if (kError) {
    __m256 high, low;
    mx_decode_scales(scale, &high, &low);
    _mm256_store_ps(s->high, high);
    _mm256_store_ps(s->low, low);
  }
}

// nvfp4: the E4M3 block scale bytes of a group (amax finite) under a finite tensor scale, and
// the blocks' decode scale D and divisor. The divisor is D, or +infinity where D is 0: every
// finite |x| / infinity is 0, whose code is magnitude 0, as nv_block_divisor's mask makes it
// (a divisor of 1 and a mask per element would cost an instruction per vector).
TERSE_AVX2_INLINE void nv_group_scales(__m256i amax, float tensor_scale, uint8_t* scale_bytes,
                                       GroupScales* s) {
  // nv_block_scale_code: E4M3 of amax / (6 s_t) rounded to nearest (magnitude_code's nearest
  // branch, written out for its n and k), or 0 when s_t is 0.
  __m256i scale = _mm256_setzero_si256();
  __m256 value = _mm256_setzero_ps();
  if (tensor_scale != 0.0f) {
    const __m256 y = _mm256_div_ps(_mm256_castsi256_ps(amax), _mm256_set1_ps(6.0f * tensor_scale));
    const __m256i bits =
        _mm256_min_epu32(_mm256_castps_si256(y), splat(float_bits(E4M3::kMaxNormal)));
    const __m256i k =
        _mm256_max_epi32(_mm256_and_si256(bits, splat(0x7f800000u)),
                         splat(static_cast<uint32_t>(127 + E4M3::kMinExponent) << 23));
    const __m256 factor = _mm256_castsi256_ps(
        _mm256_sub_epi32(splat(static_cast<uint32_t>(254 + E4M3::kMantissaBits) << 23), k));
    const __m256i n = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(bits), factor));
    scale =
        _mm256_add_epi32(_mm256_add_epi32(_mm256_srli_epi32(k, 23 - E4M3::kMantissaBits), n),
                         splat(static_cast<uint32_t>(E4M3::kBias - 128) << E4M3::kMantissaBits));
    // minifloat_magnitude_value<E4M3>(scale) is n quanta 2^(k - kMantissaBits) of y's binade
    // (subnormal codes, normal ones, and n = 2^(kMantissaBits + 1), the next binade's first,
    // alike): an exact conversion and product instead of decoding the code.
    value = _mm256_mul_ps(_mm256_cvtepi32_ps(n),
                          _mm256_castsi256_ps(_mm256_sub_epi32(
                              k, splat(static_cast<uint32_t>(E4M3::kMantissaBits) << 23))));
  }
  store_lane_bytes(scale, scale_bytes);
  // nv_decode_scale, and the divisor.
  const __m256 decode = _mm256_mul_ps(value, _mm256_set1_ps(tensor_scale));
  const __m256 zero = _mm256_cmp_ps(decode, _mm256_setzero_ps(), _CMP_EQ_OQ);
  _mm256_store_ps(s->high, decode);
  _mm256_store_ps(s->param, _mm256_blendv_ps(decode, _mm256_set1_ps(INFINITY), zero));
}

template <typename F, bool kStochastic, bool kError>
TERSE_AVX2 size_t mx_encode(const float* input, size_t begin, size_t end, RoundingKey key,
                            uint8_t* scales, uint8_t* codes, float* error) {
  for (size_t group = begin; group < end; group += kGroup) {
    const float* x = input + (group - begin) * kMxBlock;
    const __m256i amax = group_max<kMxBlock>(x);
    if (any_not_finite(amax)) return group;
    GroupScales s;
    mx_group_scales<F, kError>(amax, scales + group, &s);
    for (size_t b = 0; b < kGroup; ++b) {
      const size_t first = (group + b) * kMxBlock;
      BlockVectors block;
      block.param = _mm256_broadcast_ss(&s.param[b]);
      if (kError) {
        block.high = _mm256_broadcast_ss(&s.high[b]);
        block.low = _mm256_broadcast_ss(&s.low[b]);
        block.table = _mm256_mul_ps(_mm256_mul_ps(e2m1_magnitudes(), block.high), block.low);
      }
      encode_chunk<F, kStochastic, kError, false>(
          x + b * kMxBlock, block, block, static_cast<uint32_t>(first),
          static_cast<uint32_t>(first >> 32), key, codes + first * F::kBits / 8,
          kError ? error + first : nullptr);
    }
  }
  return end;
}

// nvfp4, with a finite tensor scale (the caller's generic loop takes a NaN one).
template <bool kStochastic, bool kError>
TERSE_AVX2 size_t nv_encode(const float* input, size_t begin, size_t end, float tensor_scale,
                            RoundingKey key, uint8_t* scales, uint8_t* codes, float* error) {
  for (size_t group = begin; group < end; group += kGroup) {
    const float* x = input + (group - begin) * kNvBlock;
    const __m256i amax = group_max<kNvBlock>(x);
    if (any_not_finite(amax)) return group;
    GroupScales s;
    nv_group_scales(amax, tensor_scale, scales + group, &s);
    for (size_t b = 0; b < kGroup; b += 2) {
      const size_t first = (group + b) * kNvBlock;
      BlockVectors pair[2];
      for (int k = 0; k < 2; ++k) {
        pair[k].param = _mm256_broadcast_ss(&s.param[b + k]);
        if (kError) {
          pair[k].table = _mm256_mul_ps(e2m1_magnitudes(), _mm256_broadcast_ss(&s.high[b + k]));
        }
      }
      encode_chunk<E2M1, kStochastic, kError, true>(
          x + b * kNvBlock, pair[0], pair[1], static_cast<uint32_t>(first),
          static_cast<uint32_t>(first >> 32), key, codes + first / 2,
          kError ? error + first : nullptr);
    }
  }
  return end;
}

// ---- Decoders: blocks [begin, end) (multiples of kGroup) of a validated payload into fp32,
// overwriting or adding (value + out, as the generic loop); `out` holds the elements of those
// blocks, from block begin's first.

template <bool kAccumulate>
TERSE_AVX2_INLINE void store_values(float* out, __m256 value) {
  if (kAccumulate) value = _mm256_add_ps(value, _mm256_loadu_ps(out));
  _mm256_storeu_ps(out, value);
}

template <typename F, bool kAccumulate>
TERSE_AVX2 void mx_decode(const uint8_t* scales, const uint8_t* codes, size_t begin, size_t end,
                          float* out) {
  for (size_t group = begin; group < end; group += kGroup) {
    alignas(32) float high[kGroup], low[kGroup];
    __m256 h, l;
    mx_decode_scales(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + group))), &h,
        &l);
    _mm256_store_ps(high, h);
    _mm256_store_ps(low, l);
    for (size_t b = 0; b < kGroup; ++b) {
      const size_t first = (group + b) * kMxBlock;
      float* block_out = out + (group + b - begin) * kMxBlock;
      const __m256 block_high = _mm256_broadcast_ss(&high[b]);
      const __m256 block_low = _mm256_broadcast_ss(&low[b]);
      if (F::kBits == 8) {
        for (int v = 0; v < 4; ++v) {
          const __m256i code = _mm256_cvtepu8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + first + 8 * v)));
          store_values<kAccumulate>(
              block_out + 8 * v,
              _mm256_mul_ps(_mm256_mul_ps(minifloat_values<F>(code), block_high), block_low));
        }
      } else {
        const __m256 table = _mm256_mul_ps(_mm256_mul_ps(e2m1_magnitudes(), block_high), block_low);
        __m128i lower, upper;
        unpack_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + first / 2)), &lower,
                       &upper);
        for (int v = 0; v < 4; ++v) {
          const __m256i code = widen8(v < 2 ? lower : upper, v % 2);
          store_values<kAccumulate>(block_out + 8 * v, e2m1_lookup(table, code));
        }
      }
    }
  }
}

template <bool kAccumulate>
TERSE_AVX2 void nv_decode(const uint8_t* scales, const uint8_t* codes, size_t begin, size_t end,
                          float tensor_scale, float* out) {
  for (size_t group = begin; group < end; group += kGroup) {
    // nv_decode_scale of each block's (validated) E4M3 code.
    alignas(32) float decode_scale[kGroup];
    const __m256i scale =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + group)));
    _mm256_store_ps(decode_scale,
                    _mm256_mul_ps(minifloat_values<E4M3>(scale), _mm256_set1_ps(tensor_scale)));
    for (size_t b = 0; b < kGroup; b += 2) {
      const size_t first = (group + b) * kNvBlock;
      float* pair_out = out + (group + b - begin) * kNvBlock;
      __m128i lower, upper;
      unpack_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + first / 2)), &lower,
                     &upper);
      for (int k = 0; k < 2; ++k) {
        const __m256 table =
            _mm256_mul_ps(e2m1_magnitudes(), _mm256_broadcast_ss(&decode_scale[b + k]));
        const __m128i block_codes = k == 0 ? lower : upper;
        store_values<kAccumulate>(pair_out + 16 * k, e2m1_lookup(table, widen8(block_codes, 0)));
        store_values<kAccumulate>(pair_out + 16 * k + 8,
                                  e2m1_lookup(table, widen8(block_codes, 1)));
      }
    }
  }
}

// Max |x| bits of a whole tensor (block_scaled_tensor_max's result), in 4 vectors of lanes.
TERSE_AVX2 inline uint32_t tensor_max_bits(const float* x, size_t count) {
  __m256i m[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                  _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    for (int k = 0; k < 4; ++k) {
      m[k] = _mm256_max_epu32(m[k], magnitude_bits(_mm256_loadu_ps(x + i + 8 * k)));
    }
  }
  const __m256i all = _mm256_max_epu32(_mm256_max_epu32(m[0], m[1]), _mm256_max_epu32(m[2], m[3]));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), all);
  uint32_t amax = 0;
  for (uint32_t lane : lanes) amax = lane > amax ? lane : amax;
  for (; i < count; ++i) {
    const uint32_t a = float_bits(x[i]) & 0x7fffffffu;
    amax = a > amax ? a : amax;
  }
  return amax;
}

}  // namespace block_scaled_avx2
}  // namespace terse

#endif  // TERSE_BLOCK_SCALED_AVX2
