#include <gtest/gtest.h>

#include <vector>

#include "common/result.h"
#include "topology/nic_discovery.h"

namespace terse {
namespace {

TEST(NicDiscovery, ReturnsWithoutErrorEvenWithNoDevices) {
  std::vector<RdmaPort> ports(3);  // stale content must be replaced
  ASSERT_EQ(discover_rdma_ports(&ports), Result::kSuccess) << last_error();
  for (const RdmaPort& port : ports) {
    EXPECT_FALSE(port.device.empty());
    EXPECT_GE(port.port, 1);
    EXPECT_GE(port.gbps(), 0);
  }
  if (ports.empty()) GTEST_SKIP() << "no RDMA devices on this machine (a normal answer)";
}

TEST(NicDiscovery, NullOutputIsRefused) {
  EXPECT_EQ(discover_rdma_ports(nullptr), Result::kInvalidArgument);
}

TEST(NicDiscovery, DecodesIbverbsWidthAndSpeedCodes) {
  EXPECT_EQ(ibverbs_width_lanes(1), 1);
  EXPECT_EQ(ibverbs_width_lanes(2), 4);
  EXPECT_EQ(ibverbs_width_lanes(4), 8);
  EXPECT_EQ(ibverbs_width_lanes(8), 12);
  EXPECT_EQ(ibverbs_width_lanes(16), 2);
  EXPECT_EQ(ibverbs_width_lanes(3), 0);
  EXPECT_EQ(ibverbs_lane_gbps(1), 2.5);
  EXPECT_EQ(ibverbs_lane_gbps(32), 25);
  EXPECT_EQ(ibverbs_lane_gbps(64), 50);
  EXPECT_EQ(ibverbs_lane_gbps(128), 100);
  EXPECT_EQ(ibverbs_lane_gbps(5), 0);
  RdmaPort hdr;
  hdr.lanes = ibverbs_width_lanes(2);
  hdr.lane_gbps = ibverbs_lane_gbps(64);
  EXPECT_EQ(hdr.gbps(), 200);  // 4x HDR
  EXPECT_STREQ(rdma_link_layer_name(RdmaLinkLayer::kInfiniBand), "InfiniBand");
}

}  // namespace
}  // namespace terse
