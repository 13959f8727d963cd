// The soak's verdict (perf/soak/flatness.h): growth from the first checkpoint after the warm-up
// to the last, under a limit, with an absolute slack where one is given.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "perf/soak/flatness.h"

namespace terse {
namespace soak {
namespace {

Checkpoint at(uint64_t calls, double rss, double heap = 1000, double threads = 4, double fds = 20,
              double residual = 4096) {
  Checkpoint c;
  c.calls = calls;
  c.values[kRssKb] = rss;
  c.values[kHeapBytes] = heap;
  c.values[kThreads] = threads;
  c.values[kOpenFds] = fds;
  c.values[kResidualBytes] = residual;
  return c;
}

TEST(SoakFlatness, TheBaselineIsTheFirstCheckpointAfterTheWarmup) {
  const std::vector<Checkpoint> checkpoints = {at(400, 1), at(800, 1), at(1200, 1), at(1600, 1)};
  EXPECT_EQ(baseline_index(checkpoints, 1600, 0.0), 0u);
  EXPECT_EQ(baseline_index(checkpoints, 1600, 0.5), 1u);  // 800 calls reach half
  EXPECT_EQ(baseline_index(checkpoints, 1600, 0.51), 2u);
  EXPECT_EQ(baseline_index(checkpoints, 100000, 0.9), 3u);  // none reaches it: the last
}

TEST(SoakFlatness, GrowthFromTheBaselineToTheLastUnderTheLimit) {
  // Warm-up growth (100 -> 1000) does not count; 1000 -> 1049 is 4.9%.
  const std::vector<Checkpoint> flat = {at(400, 100), at(800, 1000), at(1200, 1100),
                                        at(1600, 1049)};
  const Verdict verdict = judge(flat, 1, 5.0, nullptr);
  EXPECT_TRUE(verdict.flat);
  EXPECT_EQ(verdict.growth[kRssKb].baseline, 1000);
  EXPECT_EQ(verdict.growth[kRssKb].last, 1049);
  EXPECT_EQ(verdict.growth[kRssKb].peak, 1100);  // reported, not judged
  EXPECT_NEAR(verdict.growth[kRssKb].percent, 4.9, 1e-9);
  EXPECT_TRUE(verdict.complaints.empty());

  const std::vector<Checkpoint> grown = {at(400, 1000), at(800, 1000, 1000, 4, 20, 4096),
                                         at(1200, 1050, 1000, 5, 20, 8192)};
  const Verdict growth = judge(grown, 1, 5.0, nullptr);
  EXPECT_FALSE(growth.flat);
  EXPECT_FALSE(growth.growth[kRssKb].flat);          // exactly 5% is not under 5%
  EXPECT_FALSE(growth.growth[kThreads].flat);        // one thread more of four
  EXPECT_FALSE(growth.growth[kResidualBytes].flat);  // doubled
  EXPECT_TRUE(growth.growth[kHeapBytes].flat);
  EXPECT_TRUE(growth.growth[kOpenFds].flat);
  ASSERT_EQ(growth.complaints.size(), 3u);
  EXPECT_EQ(growth.complaints[0], "rss_kb grew 5.00% (1000 -> 1050, limit 5.0%)");
}

TEST(SoakFlatness, SlackAndZeroBaselines) {
  const std::vector<Checkpoint> checkpoints = {at(400, 1000, 1000, 4, 20, 0),
                                               at(800, 1080, 1000, 4, 20, 0)};
  double slack[kMetricCount] = {};
  slack[kRssKb] = 40;  // 80 kB grown, 40 forgiven: 4%
  const Verdict verdict = judge(checkpoints, 0, 5.0, slack);
  EXPECT_TRUE(verdict.growth[kRssKb].flat);
  EXPECT_NEAR(verdict.growth[kRssKb].percent, 8.0, 1e-9);  // the growth itself, as measured
  EXPECT_TRUE(verdict.growth[kResidualBytes].flat);        // 0 -> 0
  const std::vector<Checkpoint> from_zero = {at(400, 1000, 1000, 4, 20, 0),
                                             at(800, 1000, 1000, 4, 20, 1)};
  const Verdict grown = judge(from_zero, 0, 5.0, nullptr);
  EXPECT_FALSE(grown.growth[kResidualBytes].flat);
  EXPECT_TRUE(std::isinf(grown.growth[kResidualBytes].percent));
  EXPECT_TRUE(judge({at(400, 1000)}, 0, 5.0, nullptr).flat);  // one checkpoint: no growth
}

}  // namespace
}  // namespace soak
}  // namespace terse
