#include <gtest/gtest.h>

#include <cmath>

#include "common/counter_rng.h"

namespace terse {
namespace {

// mix64 is SplitMix64's output function: seeded with 0, SplitMix64's published first outputs are
// 0xe220a8397b1dcdaf and 0x6e789e6aa1b965f4 (its state advances by the golden gamma). The
// counter form mixes the index first and the seed in, so a seed equal to mix64(index) cancels it.
TEST(CounterRng, MatchesSplitMix64sPublishedOutputs) {
  EXPECT_EQ(mix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(mix64(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(counter_random(0xe220a8397b1dcdafull, 0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(counter_random(0xe220a8397b1dcdafull ^ 0x9e3779b97f4a7c15ull, 0),
            0x6e789e6aa1b965f4ull);
  EXPECT_NE(counter_random(7, 1000), counter_random(8, 1000));
  EXPECT_NE(counter_random(7, 1000), counter_random(7, 1001));
}

TEST(CounterRng, UniformHasTheMomentsOfU01) {
  const int n = 1 << 20;
  double sum = 0, sum_squares = 0;
  float low = 1, high = 0;
  for (int i = 0; i < n; ++i) {
    float u = counter_uniform(42, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_squares += double(u) * u;
    low = std::min(low, u);
    high = std::max(high, u);
  }
  double mean = sum / n, variance = sum_squares / n - mean * mean;
  // Standard error of the mean is sqrt(1/12/n) ~ 2.8e-4: 5 sigma is 1.4e-3.
  EXPECT_NEAR(mean, 0.5, 1.5e-3);
  EXPECT_NEAR(variance, 1.0 / 12, 1e-3);
  EXPECT_LT(low, 1e-4);
  EXPECT_GT(high, 1 - 1e-4);
}

}  // namespace
}  // namespace terse
