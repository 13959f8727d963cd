// The stochastic-rounding draws in SIMD lanes (codecs/rounding_random_lanes.h) against the
// stream's definition: lane j of a vector for index_low must hold the 24 random bits of element
// index_low + j, for every key, every high half of the index, and index_low up to the last
// vector below 2^32. The reference is written out here from rounding_random.h's definition (two
// lowbias32 rounds keyed by SplitMix64 of the seed), and checked against rounding_uniform too.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codecs/rounding_random_lanes.h"

namespace terse::testing {
namespace {

#if TERSE_ROUNDING_LANES

// GCC 12's AVX-512 shift intrinsics set off -Wuninitialized on their own placeholder operand once
// inlined here (GCC bug 105593, fixed in GCC 13; block_scaled_avx512.h says the same).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

uint32_t reference_hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The 24 bits that rounding_uniform scales by 2^-24 for element index_high * 2^32 + index_low.
uint32_t reference_bits(uint64_t seed, uint32_t index_low, uint32_t index_high) {
  uint64_t key = seed + 0x9e3779b97f4a7c15ull;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
  key ^= key >> 31;
  const uint32_t first = reference_hash(index_low ^ static_cast<uint32_t>(key));
  return reference_hash(first ^ static_cast<uint32_t>(key >> 32) ^ index_high) >> 8;
}

__attribute__((target("avx2"))) void avx2_bits(RoundingKey key, uint32_t index_low,
                                               uint32_t index_high, uint32_t out[8]) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      rounding_bits24(key, index_low, rounding_lanes_middle(key, index_high)));
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void avx512_bits(RoundingKey key,
                                                                               uint32_t index_low,
                                                                               uint32_t index_high,
                                                                               uint32_t out[16]) {
  _mm512_storeu_si512(out,
                      rounding_bits24_x16(key, index_low, rounding_lanes_middle(key, index_high)));
}

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

// Vector starts: from 0, around 2^16 and 2^31 (where the first rewriting's shifted bits change),
// the last vectors below 2^32, and random ones; each rounded down to the lane count.
std::vector<uint32_t> starts(std::mt19937_64& rng) {
  std::vector<uint32_t> all = {0u,          16u,         0xfff0u,     0x10000u,
                               0x7ffffff0u, 0x80000000u, 0xffffffe0u, 0xfffffff0u};
  for (int i = 0; i < 200; ++i) all.push_back(static_cast<uint32_t>(rng()));
  return all;
}

TEST(RoundingRandomLanes, EveryLaneDrawsItsElementsNumber) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2";
  std::mt19937_64 rng(3);
  const uint64_t seeds[] = {0, 1, 7, 0x5eed, 0xffffffffffffffffull, rng(), rng()};
  for (uint64_t seed : seeds) {
    const RoundingKey key = rounding_key(seed);
    for (uint32_t index_high : {0u, 1u, 0x12345u, static_cast<uint32_t>(rng())}) {
      for (uint32_t start : starts(rng)) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " index " + std::to_string(index_high) + ":" +
                     std::to_string(start));
        uint32_t lanes[16];
        const uint32_t start8 = start & ~7u;
        avx2_bits(key, start8, index_high, lanes);
        for (uint32_t j = 0; j < 8; ++j) {
          const uint32_t expected = reference_bits(seed, start8 + j, index_high);
          ASSERT_EQ(lanes[j], expected) << "AVX2 lane " << j;
          // The same stream as the generic code's draw (24 bits scaled by 2^-24, exact).
          ASSERT_EQ(static_cast<float>(expected) * 0x1p-24f,
                    rounding_uniform(key, start8 + j, index_high));
        }
        if (!has_avx512()) continue;
        const uint32_t start16 = start & ~15u;
        avx512_bits(key, start16, index_high, lanes);
        for (uint32_t j = 0; j < 16; ++j) {
          ASSERT_EQ(lanes[j], reference_bits(seed, start16 + j, index_high))
              << "AVX-512 lane " << j;
        }
      }
    }
  }
}

#pragma GCC diagnostic pop

#endif  // TERSE_ROUNDING_LANES

}  // namespace
}  // namespace terse::testing
