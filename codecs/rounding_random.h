// Uniform random numbers in [0, 1) for the stochastic rounding of the low-bit quantizers (qsgd,
// terngrad): a pure function of (seed, element index), so the CPU and the GPU draw the same number
// for the same element, in any order, on any number of threads.
//
// Unlike common/counter_rng.h (SplitMix64: 64-bit multiplies, which AVX2 cannot vectorise, so a
// per-element call runs scalar at about a tenth of memory speed), the per-element work here is
// 32-bit: two rounds of the `lowbias32` integer hash (C. Wellons, hash-prospector; a bijection on
// 32 bits with near-ideal avalanche), keyed by 64 bits that SplitMix64 derives once per message
// from the seed. The index enters as its low and high 32-bit halves.
#pragma once

#include <cstdint>

#include "common/counter_rng.h"
#include "common/host_device.h"

namespace terse {

struct RoundingKey {
  uint32_t low;
  uint32_t high;
};

TERSE_HD RoundingKey rounding_key(uint64_t seed) {
  const uint64_t key = mix64(seed);
  return RoundingKey{static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)};
}

TERSE_HD uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The draw for the element whose index is index_high * 2^32 + index_low: 24 random bits, exactly
// representable in fp32 (converted through int32, which every SIMD level can do).
TERSE_HD float rounding_uniform(RoundingKey key, uint32_t index_low, uint32_t index_high) {
  uint32_t h = lowbias32(index_low ^ key.low);
  h = lowbias32(h ^ key.high ^ index_high);
  return static_cast<float>(static_cast<int32_t>(h >> 8)) * (1.0f / 16777216.0f);
}

TERSE_HD float rounding_uniform(RoundingKey key, uint64_t index) {
  return rounding_uniform(key, static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32));
}

}  // namespace terse
