// ibverbs' ports replace what hwloc said of each RDMA device.
#include <gtest/gtest.h>

#include "topology/live_details.h"

namespace terse {
namespace {

RdmaPort verbs_port(const char* device, int port, bool active, int lanes, double lane_gbps) {
  RdmaPort entry;
  entry.device = device;
  entry.port = port;
  entry.active = active;
  entry.lanes = lanes;
  entry.lane_gbps = lane_gbps;
  entry.link_layer = RdmaLinkLayer::kInfiniBand;
  return entry;
}

TEST(LiveDetails, IbverbsPortsReplaceHwlocsAtTheDevicesLocation) {
  MachineTopology topology;
  NicDevice hwloc_port;
  hwloc_port.name = "mlx5_0";
  hwloc_port.kind = NicKind::kRdma;
  hwloc_port.port = 1;
  hwloc_port.where = DeviceLocation{"0000:06:00.0", {3, 1}, 0};
  NicDevice eth;
  eth.name = "eth0";
  topology.nics = {hwloc_port, eth};
  apply_rdma_ports({verbs_port("mlx5_0", 1, true, 4, 50), verbs_port("mlx5_0", 2, false, 4, 50),
                    verbs_port("mlx5_9", 1, true, 4, 100)},
                   &topology);
  ASSERT_EQ(topology.nics.size(), 4u);
  EXPECT_EQ(topology.nics[0].label(), "mlx5_0:1");
  EXPECT_DOUBLE_EQ(topology.nics[0].gbps, 200);  // 4x HDR
  EXPECT_EQ(topology.nics[0].speed_source, "ibverbs");
  EXPECT_EQ(topology.nics[0].state, PortState::kActive);
  EXPECT_EQ(topology.nics[0].where.pci_bus_id, "0000:06:00.0");
  EXPECT_EQ(topology.nics[1].label(), "mlx5_0:2");
  EXPECT_EQ(topology.nics[1].state, PortState::kDown);
  EXPECT_EQ(topology.nics[1].where.switches, (std::vector<int>{3, 1}));
  EXPECT_EQ(topology.nics[2].name, "eth0");
  EXPECT_EQ(topology.nics[3].label(), "mlx5_9:1");  // not in hwloc: location unknown
  EXPECT_EQ(topology.nics[3].where.locality, -1);
}

TEST(LiveDetails, DeviceIbverbsCannotOpenKeepsHwlocsView) {
  MachineTopology topology;
  NicDevice hwloc_port;
  hwloc_port.name = "mlx5_0";
  hwloc_port.kind = NicKind::kRdma;
  hwloc_port.port = 1;
  hwloc_port.state = PortState::kActive;
  topology.nics = {hwloc_port};
  apply_rdma_ports({}, &topology);
  ASSERT_EQ(topology.nics.size(), 1u);
  EXPECT_EQ(topology.nics[0].state, PortState::kActive);
  EXPECT_EQ(topology.nics[0].gbps, 0);
}

}  // namespace
}  // namespace terse
