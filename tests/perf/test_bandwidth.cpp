// algbw and busbw as nccl-tests defines them, and each collective's bus factor.
#include <gtest/gtest.h>

#include "perf/nccl_tests/bandwidth.h"
#include "perf/nccl_tests/collectives/collectives.h"

namespace terse {
namespace perf {
namespace {

TEST(PerfBandwidth, FactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(1), 0.0);
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(allreduce_bus_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(gather_bus_factor(2), 0.5);
  EXPECT_DOUBLE_EQ(gather_bus_factor(4), 0.75);
  EXPECT_DOUBLE_EQ(unit_bus_factor(8), 1.0);
}

TEST(PerfBandwidth, EachCollectiveUsesItsFactor) {
  for (int n : {1, 2, 3, 8}) {
    EXPECT_DOUBLE_EQ(all_reduce_test().bus_factor(n), 2.0 * (n - 1) / n);
    EXPECT_DOUBLE_EQ(all_gather_test().bus_factor(n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(reduce_scatter_test().bus_factor(n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(alltoall_test().bus_factor(n), (n - 1.0) / n);
    EXPECT_DOUBLE_EQ(broadcast_test().bus_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(reduce_test().bus_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(sendrecv_test().bus_factor(n), 1.0);
  }
}

TEST(PerfBandwidth, BytesOverSecondsInGigabytes) {
  const Bandwidth bw = bandwidth(64u << 20, 0.01, allreduce_bus_factor(4));
  EXPECT_DOUBLE_EQ(bw.algbw, (64.0 * 1024 * 1024) / 1e9 / 0.01);
  EXPECT_DOUBLE_EQ(bw.busbw, bw.algbw * 1.5);
}

}  // namespace
}  // namespace perf
}  // namespace terse
