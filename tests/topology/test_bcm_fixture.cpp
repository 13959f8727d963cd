// The hand-written Broadcom PEX Gen5 node: GPU0 and mlx5_0 sit under two second-level switches
// of one Broadcom switch in base mode. NCCL fuses the second level into the first, so the pair
// is PIX (one switch), where the same two-level shape of another make is PXB (the 8-GPU
// fixture's leaf switches under their top switch).
#include <gtest/gtest.h>

#include "topology_fixtures.h"

namespace terse {
namespace {

TEST(BcmFixture, SecondLevelFusedIntoTheFirst) {
  const MachineTopology topology = load_fixture("bcm-gen5-1gpu-1nic.xml");
  ASSERT_EQ(topology.gpus.size(), 1u);
  ASSERT_EQ(topology.nics.size(), 1u);
  EXPECT_EQ(topology.gpus[0].where.pci_bus_id, "0000:05:00.0");
  EXPECT_EQ(topology.nics[0].where.pci_bus_id, "0000:08:00.0");
  EXPECT_EQ(topology.gpu_nic(0, 0), PathClass::kPix);
  ASSERT_EQ(topology.switches.size(), 1u);  // the top level only
  EXPECT_EQ(topology.switches[0].pci_bus_id, "0000:01:00.0");
}

}  // namespace
}  // namespace terse
