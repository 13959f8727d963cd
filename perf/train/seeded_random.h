// Random numbers that are the same on every rank and every standard library: std::mt19937's
// sequence is fixed by the standard, but the distributions (and std::shuffle) are not, so the
// conversions to floats and permutations are written here.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace terse {
namespace train {

class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(static_cast<std::mt19937::result_type>(seed)) {}

  // Uniform in [lo, hi), from the top 24 bits of one draw.
  float uniform(float lo, float hi) {
    const float unit = static_cast<float>(engine_() >> 8) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * unit;
  }

  // 0..count-1 in an order fixed by the seed (Fisher-Yates).
  std::vector<int> permutation(int count) {
    std::vector<int> order(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) order[static_cast<size_t>(i)] = i;
    for (int i = count - 1; i > 0; --i) {
      const int j = static_cast<int>(engine_() % static_cast<uint32_t>(i + 1));
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
    return order;
  }

 private:
  std::mt19937 engine_;
};

}  // namespace train
}  // namespace terse
