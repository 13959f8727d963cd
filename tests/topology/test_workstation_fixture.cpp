// The hand-written 4-GPU node with one (dual-port) NIC: switch A holds GPU0, GPU1 and mlx5_0
// (port 1 active, port 2 down); switch B holds GPU2 and GPU3; one socket (NUMA 0, CPUs 0-7);
// NVLink bridges join GPU0-GPU1 and GPU2-GPU3. Each GPU shows as cudaN and nvmlN.
#include <gtest/gtest.h>

#include "topology/nic_assignment.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

constexpr const char kWorkstation[] = "workstation-4gpu-1nic.xml";

TEST(WorkstationFixture, CudaAndNvmlViewsOfAGpuAreOneGpu) {
  const MachineTopology topology = load_fixture(kWorkstation);
  ASSERT_EQ(topology.gpus.size(), 4u);
  EXPECT_EQ(topology.gpus[0].name, "cuda0");
  EXPECT_EQ(topology.gpus[3].name, "cuda3");
  EXPECT_EQ(topology.gpus[2].where.pci_bus_id, "0000:12:00.0");
}

TEST(WorkstationFixture, BothPortsOfTheNicWithTheirState) {
  const MachineTopology topology = load_fixture(kWorkstation);
  ASSERT_EQ(topology.nics.size(), 2u);
  EXPECT_EQ(topology.nics[0].label(), "mlx5_0:1");
  EXPECT_EQ(topology.nics[0].state, PortState::kActive);
  EXPECT_EQ(topology.nics[1].label(), "mlx5_0:2");
  EXPECT_EQ(topology.nics[1].state, PortState::kDown);
  EXPECT_EQ(topology.nic_nic(0, 1), PathClass::kLoc);  // one PCI function
}

TEST(WorkstationFixture, PathClasses) {
  const MachineTopology topology = load_fixture(kWorkstation);
  ASSERT_EQ(topology.gpus.size(), 4u);
  ASSERT_EQ(topology.nics.size(), 2u);
  EXPECT_EQ(topology.gpu_nic(0, 0), PathClass::kPix);
  EXPECT_EQ(topology.gpu_nic(1, 0), PathClass::kPix);
  EXPECT_EQ(topology.gpu_nic(2, 0), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_nic(3, 0), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_gpu(0, 1), PathClass::kNvl);
  EXPECT_EQ(topology.gpu_gpu(3, 2), PathClass::kNvl);
  EXPECT_EQ(topology.gpu_gpu(0, 2), PathClass::kPhb);  // no NVLink: switch A, host, switch B
  EXPECT_EQ(topology.gpu_gpu(1, 3), PathClass::kPhb);
  EXPECT_EQ(topology.nvlinks, (std::vector<std::pair<int, int>>{{0, 1}, {2, 3}}));
}

TEST(WorkstationFixture, EveryRankTakesTheActivePort) {
  const MachineTopology topology = load_fixture(kWorkstation);
  const NicPlan plan = assign_nics(topology, 4);
  ASSERT_EQ(plan.ranks.size(), 4u);
  EXPECT_EQ(plan.rails(), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(plan.ranks[0].path, PathClass::kPix);
  EXPECT_EQ(plan.ranks[1].path, PathClass::kPix);
  EXPECT_EQ(plan.ranks[2].path, PathClass::kPhb);
  EXPECT_EQ(plan.ranks[3].gpu, 3);
}

TEST(WorkstationFixture, NumaAffinity) {
  const MachineTopology topology = load_fixture(kWorkstation);
  ASSERT_EQ(topology.numa_nodes.size(), 1u);
  for (const GpuDevice& gpu : topology.gpus) {
    const Locality* place = topology.locality_of(gpu.where);
    ASSERT_NE(place, nullptr);
    EXPECT_EQ(place->numa_node, 0);
    EXPECT_EQ(place->cpuset, "0-7");
  }
}

}  // namespace
}  // namespace terse
