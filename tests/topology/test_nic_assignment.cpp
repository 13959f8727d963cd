// NIC choice on machines built by hand: the spreading rules without hwloc in the way.
#include <gtest/gtest.h>

#include "topology/nic_assignment.h"

namespace terse {
namespace {

NicDevice nic(const char* name, NicKind kind, std::vector<int> switches, int locality,
              PortState state = PortState::kActive) {
  NicDevice device;
  device.name = name;
  device.kind = kind;
  device.port = kind == NicKind::kRdma ? 1 : 0;
  device.state = state;
  device.where = DeviceLocation{std::string("bus-") + name, std::move(switches), locality};
  return device;
}

GpuDevice gpu(const char* bus, std::vector<int> switches, int locality) {
  GpuDevice device;
  device.where = DeviceLocation{bus, std::move(switches), locality};
  return device;
}

MachineTopology two_numa_nodes() {
  MachineTopology topology;
  topology.localities = {Locality{"0", "0-7", 0}, Locality{"1", "8-15", 1}};
  return topology;
}

TEST(NicAssignment, WithoutGpusByNumaNodeOfTheRank) {
  MachineTopology topology = two_numa_nodes();
  topology.nics = {nic("a", NicKind::kRdma, {}, 0), nic("b", NicKind::kRdma, {}, 1),
                   nic("c", NicKind::kRdma, {}, 0)};
  const NicPlan plan = assign_nics(topology, 5, {0, 0, 1, 1, 0});
  EXPECT_EQ(plan.rails(), (std::vector<int>{0, 2, 1, 1, 0}));
  for (const RankNic& rank : plan.ranks) EXPECT_EQ(rank.gpu, -1);
}

TEST(NicAssignment, WithoutGpusOrNumaRoundRobin) {
  MachineTopology topology = two_numa_nodes();
  topology.nics = {nic("a", NicKind::kRdma, {}, 0), nic("b", NicKind::kRdma, {}, 1),
                   nic("c", NicKind::kRdma, {}, 0)};
  EXPECT_EQ(assign_nics(topology, 5).rails(), (std::vector<int>{0, 1, 2, 0, 1}));
  // A NUMA node with no NIC of its own: any NIC, the least used.
  EXPECT_EQ(assign_nics(topology, 2, {7, 7}).rails(), (std::vector<int>{0, 1}));
}

TEST(NicAssignment, EquallyCloseNicsAreSpread) {
  // Two GPUs and two NICs behind one switch (as on a DGX A100 switch): all pairs are PIX.
  MachineTopology topology = two_numa_nodes();
  topology.gpus = {gpu("g0", {0}, 0), gpu("g1", {0}, 0)};
  topology.nics = {nic("a", NicKind::kRdma, {0}, 0), nic("b", NicKind::kRdma, {0}, 0)};
  const NicPlan plan = assign_nics(topology, 4);
  EXPECT_EQ(plan.rails(), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(plan.ranks[1].gpu, 1);
  EXPECT_EQ(plan.ranks[3].gpu, 1);
  EXPECT_EQ(plan.ranks[3].path, PathClass::kPix);
}

TEST(NicAssignment, ClosestNicWinsOverSpreading) {
  // GPU0's switch holds NIC a; NIC b is on the other socket. Both ranks on GPU0 take a.
  MachineTopology topology = two_numa_nodes();
  topology.gpus = {gpu("g0", {0}, 0)};
  topology.nics = {nic("a", NicKind::kRdma, {0}, 0), nic("b", NicKind::kRdma, {1}, 1)};
  EXPECT_EQ(assign_nics(topology, 2).rails(), (std::vector<int>{0, 0}));
}

TEST(NicAssignment, RdmaPortsBeforeEthernetAndDownPortsLast) {
  MachineTopology topology = two_numa_nodes();
  topology.gpus = {gpu("g0", {0}, 0)};
  topology.nics = {nic("eth0", NicKind::kEthernet, {0}, 0), nic("mlx5_0", NicKind::kRdma, {1}, 1),
                   nic("mlx5_1", NicKind::kRdma, {0}, 0, PortState::kDown)};
  const NicPlan plan = assign_nics(topology, 1);
  EXPECT_EQ(plan.rails(), (std::vector<int>{1}));  // UCX sends over the RDMA port
  EXPECT_EQ(plan.ranks[0].path, PathClass::kSys);
  topology.nics[1].state = PortState::kDown;  // every RDMA port down: Ethernet
  EXPECT_EQ(assign_nics(topology, 1).rails(), (std::vector<int>{0}));
  topology.nics[0].state = PortState::kDown;  // everything down: the closest of all
  EXPECT_EQ(assign_nics(topology, 1).rails(), (std::vector<int>{0}));
}

TEST(NicAssignment, NoNics) {
  MachineTopology topology = two_numa_nodes();
  topology.gpus = {gpu("g0", {}, 0)};
  const NicPlan plan = assign_nics(topology, 2);
  EXPECT_EQ(plan.rails(), (std::vector<int>{-1, -1}));
  EXPECT_EQ(plan.ranks[1].gpu, 0);
  EXPECT_TRUE(assign_nics(topology, 0).ranks.empty());
}

}  // namespace
}  // namespace terse
