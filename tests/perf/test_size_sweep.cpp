// The row sizes nccl-tests steps through, and the warm-up sizes before them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "perf/nccl_tests/size_sweep.h"

namespace terse {
namespace perf {
namespace {

using Sizes = std::vector<size_t>;

TEST(PerfSizeSweep, ByFactorOrByStep) {
  EXPECT_EQ(sweep_sizes(8, 1 << 20, 4, 0),
            (Sizes{8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288}));
  EXPECT_EQ(sweep_sizes(1000, 4000, 1, 1000), (Sizes{1000, 2000, 3000, 4000}));
  EXPECT_EQ(sweep_sizes(32 << 20, 32 << 20, 1, 1 << 20), (Sizes{32 << 20}));
  EXPECT_EQ(sweep_sizes(0, 10, 1, 5), (Sizes{0, 5, 10}));
}

TEST(PerfSizeSweep, StopsBeforeOverflow) {
  EXPECT_EQ(sweep_sizes(SIZE_MAX / 2, SIZE_MAX, 4, 0), (Sizes{SIZE_MAX / 2}));
  EXPECT_EQ(sweep_sizes(SIZE_MAX - 1, SIZE_MAX, 1, 8), (Sizes{SIZE_MAX - 1}));
  EXPECT_EQ(warmup_sizes(SIZE_MAX - 1, SIZE_MAX), (Sizes{SIZE_MAX - 1}));
}

TEST(PerfSizeSweep, WarmupDoublesFromTheSmallest) {
  EXPECT_EQ(warmup_sizes(8, 100), (Sizes{8, 16, 32, 64}));
  EXPECT_EQ(warmup_sizes(0, 4), (Sizes{0, 1, 2, 4}));
  EXPECT_EQ(warmup_sizes(7, 7), (Sizes{7}));
}

}  // namespace
}  // namespace perf
}  // namespace terse
