// rounding_random.h's draws for consecutive element indices in AVX2 (8) and AVX-512 (16) lanes,
// as 24-bit integers: lane j holds h >> 8, the bits that rounding_uniform(key, index_low + j,
// index_high) scales by 2^-24. The SIMD encoders of the block-scaled codecs use them as integers
// (block_scaled_avx2.h's magnitude_code), never as floats.
//
// Why not rounding_uniform lane by lane: that is 20 vector instructions per vector of draws (two
// lowbias32 rounds of 8, the index and key xors, the >> 8), 3 more to make floats 1 - u of them,
// and 5 for the comparison; stochastic rounding was bound by them (mxfp4 and nvfp4 at 0.4-0.5x
// memcpy). Exact rewritings of the same function cut the 20 to 13 (8 lanes need index_low to be
// a multiple of 8, 16 lanes a multiple of 16; the encoders' vectors start at block offsets that
// are), and the integer comparison takes 2:
//   - The first round's x ^= x >> 16 on x = (index_low + j) ^ key.low: j < 16 changes only bits
//     the shift drops, and index_low's low bits are 0, so it is j ^ s with one scalar s per
//     vector (b ^ (b >> 16), b = index_low ^ key.low).
//   - The first round's last step, the xor with key.high ^ index_high, and the second round's
//     first step are x ^= x >> 16, ^ k, x ^= x >> 16. The xorshift by 16 is linear over xor and
//     its own inverse on 32 bits, so the three are x ^ (k ^ (k >> 16)): one xor with a constant.
//   - The second round's last step and the >> 8, (x ^ (x >> 16)) >> 8, are (x >> 8) ^ (x >> 24):
//     as many instructions, one fewer in the dependency chain.
// The four multiplies stay: nothing exact replaces them. The stream is the same bit for bit,
// which tests/codecs/test_rounding_random_lanes.cpp checks against its definition.
#pragma once

#include <cstdint>

#include "codecs/rounding_random.h"

#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(TERSE_NO_CLONES)
#define TERSE_ROUNDING_LANES 1
#include <immintrin.h>
#else
#define TERSE_ROUNDING_LANES 0
#endif

#if TERSE_ROUNDING_LANES

namespace terse {

// The per-vector scalar of the first rewriting above.
inline uint32_t rounding_lanes_start(RoundingKey key, uint32_t index_low) {
  const uint32_t b = index_low ^ key.low;
  return b ^ (b >> 16);
}

// The constant of the second rewriting, for the elements whose index's high half is index_high.
inline uint32_t rounding_lanes_middle(RoundingKey key, uint32_t index_high) {
  const uint32_t k = key.high ^ index_high;
  return k ^ (k >> 16);
}

// lowbias32's multiply and xorshift-15 core: x = (x * 0x7feb352d ^ (...) >> 15) * 0x846ca68b.
__attribute__((target("avx2"), always_inline)) inline __m256i rounding_lanes_core(__m256i x) {
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  return _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
}

// The 24 random bits of the 8 indices index_low + 0..7 (index_low a multiple of 8); `middle` is
// rounding_lanes_middle(key, index_high).
__attribute__((target("avx2"), always_inline)) inline __m256i rounding_bits24(RoundingKey key,
                                                                              uint32_t index_low,
                                                                              uint32_t middle) {
  __m256i x =
      _mm256_xor_si256(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                       _mm256_set1_epi32(static_cast<int>(rounding_lanes_start(key, index_low))));
  x = rounding_lanes_core(x);
  x = _mm256_xor_si256(x, _mm256_set1_epi32(static_cast<int>(middle)));
  x = rounding_lanes_core(x);
  return _mm256_xor_si256(_mm256_srli_epi32(x, 8), _mm256_srli_epi32(x, 24));
}

#define TERSE_ROUNDING_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"), always_inline))

TERSE_ROUNDING_AVX512 inline __m512i rounding_lanes_core(__m512i x) {
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  return _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int>(0x846ca68bu)));
}

// The 24 random bits of the 16 indices index_low + 0..15 (index_low a multiple of 16).
TERSE_ROUNDING_AVX512 inline __m512i rounding_bits24_x16(RoundingKey key, uint32_t index_low,
                                                         uint32_t middle) {
  __m512i x =
      _mm512_xor_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_epi32(static_cast<int>(rounding_lanes_start(key, index_low))));
  x = rounding_lanes_core(x);
  x = _mm512_xor_si512(x, _mm512_set1_epi32(static_cast<int>(middle)));
  x = rounding_lanes_core(x);
  return _mm512_xor_si512(_mm512_srli_epi32(x, 8), _mm512_srli_epi32(x, 24));
}

#undef TERSE_ROUNDING_AVX512

}  // namespace terse

#endif  // TERSE_ROUNDING_LANES
