// A counter-based random number generator: the value for (seed, index) is a pure function, so
// stochastic rounding and random selection give the same result on CPU and GPU, in any order,
// on any number of threads. SplitMix64's finaliser mixes well enough for rounding and sampling.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace terse {

TERSE_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TERSE_HD uint64_t counter_random(uint64_t seed, uint64_t index) {
  return mix64(seed ^ mix64(index));
}

// Uniform in [0, 1) with 24 random bits (exactly representable in fp32).
TERSE_HD float counter_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(counter_random(seed, index) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace terse
