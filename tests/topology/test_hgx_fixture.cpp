// The hand-written 8-GPU, 8-NIC two-socket node (fixtures/make_fixtures.py says its layout): each
// leaf PCIe switch holds GPU i and NIC i; leaf switches 2k and 2k+1 share a top switch; devices
// 0-3 sit on socket 0 (NUMA 0, CPUs 0-7), 4-7 on socket 1 (NUMA 1, CPUs 8-15). Every expected
// value below is read off that layout, not computed by the code under test.
#include <gtest/gtest.h>

#include "topology/nic_assignment.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

constexpr const char kHgx[] = "hgx-8gpu-8nic-2socket.xml";

TEST(HgxFixture, FindsEightGpusAndEightNicsWithTheirBusIds) {
  const MachineTopology topology = load_fixture(kHgx);
  ASSERT_EQ(topology.gpus.size(), 8u);
  ASSERT_EQ(topology.nics.size(), 8u);
  EXPECT_EQ(topology.gpus[0].name, "cuda0");
  EXPECT_EQ(topology.gpus[0].where.pci_bus_id, "0000:05:00.0");
  EXPECT_EQ(topology.gpus[1].where.pci_bus_id, "0000:09:00.0");
  EXPECT_EQ(topology.gpus[4].where.pci_bus_id, "0000:45:00.0");
  EXPECT_EQ(topology.gpus[7].where.pci_bus_id, "0000:59:00.0");
  EXPECT_EQ(topology.gpus[3].model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(topology.nics[0].label(), "mlx5_0:1");
  EXPECT_EQ(topology.nics[0].where.pci_bus_id, "0000:06:00.0");
  EXPECT_EQ(topology.nics[7].label(), "mlx5_7:1");
  EXPECT_EQ(topology.nics[7].where.pci_bus_id, "0000:5a:00.0");
  for (const NicDevice& nic : topology.nics) {
    EXPECT_EQ(nic.kind, NicKind::kRdma) << nic.name;  // ibN are the HCAs' own interfaces
    EXPECT_EQ(nic.state, PortState::kActive) << nic.name;
    EXPECT_EQ(nic.gbps, 0) << "a file says nothing of speed";
  }
  EXPECT_TRUE(topology.nvlinks.empty());
  EXPECT_FALSE(topology.live);
}

TEST(HgxFixture, GpuNicPathClassesFollowTheSwitches) {
  const MachineTopology topology = load_fixture(kHgx);
  ASSERT_EQ(topology.gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(topology.gpu_nic(i, i), PathClass::kPix) << i;
  EXPECT_EQ(topology.gpu_nic(0, 1), PathClass::kPxb);  // leaf 0 -> top switch -> leaf 1
  EXPECT_EQ(topology.gpu_nic(1, 0), PathClass::kPxb);
  EXPECT_EQ(topology.gpu_nic(6, 7), PathClass::kPxb);
  EXPECT_EQ(topology.gpu_nic(0, 2), PathClass::kPhb);  // the other top switch, same socket
  EXPECT_EQ(topology.gpu_nic(3, 0), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_nic(5, 7), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_nic(0, 4), PathClass::kSys);  // across sockets
  EXPECT_EQ(topology.gpu_nic(7, 0), PathClass::kSys);
}

TEST(HgxFixture, GpuGpuPathClasses) {
  const MachineTopology topology = load_fixture(kHgx);
  ASSERT_EQ(topology.gpus.size(), 8u);
  EXPECT_EQ(topology.gpu_gpu(2, 2), PathClass::kLoc);
  EXPECT_EQ(topology.gpu_gpu(0, 1), PathClass::kPxb);
  EXPECT_EQ(topology.gpu_gpu(4, 5), PathClass::kPxb);
  EXPECT_EQ(topology.gpu_gpu(0, 3), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_gpu(3, 4), PathClass::kSys);
  EXPECT_EQ(topology.gpu_gpu(1, 6), PathClass::kSys);
}

TEST(HgxFixture, SwitchesAreCountedAsNcclCountsThem) {
  // 2 top switches and 4 leaf switches per socket; root ports and downstream ports are not
  // switches of their own.
  const MachineTopology topology = load_fixture(kHgx);
  EXPECT_EQ(topology.switches.size(), 12u);
  ASSERT_EQ(topology.gpus.size(), 8u);
  EXPECT_EQ(topology.gpus[0].where.switches.size(), 2u);  // its leaf, then its top switch
  const PciSwitch& leaf =
      topology.switches.at(static_cast<size_t>(topology.gpus[0].where.switches[0]));
  EXPECT_EQ(leaf.pci_bus_id, "0000:03:00.0");  // the leaf switch's upstream port
  const PciSwitch& top =
      topology.switches.at(static_cast<size_t>(topology.gpus[0].where.switches[1]));
  EXPECT_EQ(top.pci_bus_id, "0000:01:00.0");
}

TEST(HgxFixture, NumaAffinityOfEachDevice) {
  const MachineTopology topology = load_fixture(kHgx);
  ASSERT_EQ(topology.numa_nodes.size(), 2u);
  EXPECT_EQ(topology.numa_nodes[0].os_index, 0);
  EXPECT_EQ(topology.numa_nodes[0].cpuset, "0-7");
  EXPECT_EQ(topology.numa_nodes[1].cpuset, "8-15");
  EXPECT_EQ(topology.numa_nodes[1].memory_bytes, 274877906944u);
  for (int i = 0; i < 8; ++i) {
    const Locality* gpu = topology.locality_of(topology.gpus[static_cast<size_t>(i)].where);
    const Locality* nic = topology.locality_of(topology.nics[static_cast<size_t>(i)].where);
    ASSERT_NE(gpu, nullptr);
    ASSERT_NE(nic, nullptr);
    EXPECT_EQ(gpu->numa_node, i < 4 ? 0 : 1) << "GPU" << i;
    EXPECT_EQ(nic->numa_node, i < 4 ? 0 : 1) << "NIC" << i;
    EXPECT_EQ(gpu->cpuset, i < 4 ? "0-7" : "8-15") << "GPU" << i;
  }
}

TEST(HgxFixture, EachLocalRankTakesTheNicOnItsGpusSwitch) {
  const MachineTopology topology = load_fixture(kHgx);
  const NicPlan plan = assign_nics(topology, 8);
  ASSERT_EQ(plan.ranks.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(plan.ranks[static_cast<size_t>(i)].gpu, i);
    EXPECT_EQ(plan.ranks[static_cast<size_t>(i)].nic, i);
    EXPECT_EQ(plan.ranks[static_cast<size_t>(i)].path, PathClass::kPix);
  }
  EXPECT_EQ(plan.rails(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(HgxFixture, SixteenRanksShareGpusAndKeepTheirRails) {
  // Local rank i drives GPU i mod 8, so ranks 8-15 land on the NICs of ranks 0-7: the same rail
  // as the rank sharing their GPU.
  const MachineTopology topology = load_fixture(kHgx);
  const NicPlan plan = assign_nics(topology, 16);
  ASSERT_EQ(plan.ranks.size(), 16u);
  for (int i = 8; i < 16; ++i) {
    EXPECT_EQ(plan.ranks[static_cast<size_t>(i)].gpu, i - 8);
    EXPECT_EQ(plan.ranks[static_cast<size_t>(i)].nic, i - 8);
  }
}

}  // namespace
}  // namespace terse
