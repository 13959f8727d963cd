// hwloc's own test exports of real machines (fixtures/, from hwloc's test suite, BSD
// licence): the devices and paths read off each file by hand.
#include <gtest/gtest.h>

#include "topology/nic_assignment.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

// Two sockets; no CUDA/NVML devices, so the NVIDIA 3D controllers are the GPUs: 06:00.0 on a
// root port of socket 0, 11:00.0 and 14:00.0 on root ports of socket 1. mlx4_0 (05:00.0, with
// eth2 and ib0 as its interfaces) and eth0/eth1 (04:00.x) sit on socket 0.
TEST(HwlocTestFiles, TwoSocketsWithPciGpusAndAConnectX) {
  const MachineTopology topology = load_fixture("24em64t-2n6c2t-pci.xml");
  ASSERT_EQ(topology.gpus.size(), 3u);
  EXPECT_EQ(topology.gpus[0].where.pci_bus_id, "0000:06:00.0");
  EXPECT_EQ(topology.gpus[1].where.pci_bus_id, "0000:11:00.0");
  EXPECT_EQ(topology.gpus[2].where.pci_bus_id, "0000:14:00.0");
  EXPECT_EQ(topology.gpus[0].name, "");  // a bare PCI device
  ASSERT_EQ(topology.nics.size(), 3u);
  EXPECT_EQ(topology.nics[0].label(), "mlx4_0:1");
  EXPECT_EQ(topology.nics[0].state, PortState::kUnknown);  // the file has no PortNState
  EXPECT_EQ(topology.nics[1].name, "eth0");
  EXPECT_EQ(topology.nics[1].kind, NicKind::kEthernet);
  EXPECT_EQ(topology.nics[2].name, "eth1");
  EXPECT_EQ(topology.gpu_nic(0, 0), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_nic(1, 0), PathClass::kSys);
  EXPECT_EQ(topology.gpu_gpu(1, 2), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_gpu(0, 1), PathClass::kSys);
  ASSERT_EQ(topology.numa_nodes.size(), 2u);
  EXPECT_EQ(topology.numa_nodes[1].cpuset, "1,3,5,7,9,11,13,15,17,19,21,23");
  // RDMA before Ethernet: every rank takes mlx4_0, even from the far socket.
  EXPECT_EQ(assign_nics(topology, 3).rails(), (std::vector<int>{0, 0, 0}));
}

// Of three NVIDIA PCI devices only 84:00.0 has a CUDA device (cuda0): the GPU list holds that
// one. mlx5_0 (port 1 active) hangs from the same root port 80:03.0, which is the CPU's: PHB.
TEST(HwlocTestFiles, OneCudaGpuBesideAnActiveHca) {
  const MachineTopology topology = load_fixture("32em64t-2n8c2t-pci-normalio.xml");
  ASSERT_EQ(topology.gpus.size(), 1u);
  EXPECT_EQ(topology.gpus[0].name, "cuda0");
  EXPECT_EQ(topology.gpus[0].where.pci_bus_id, "0000:84:00.0");
  EXPECT_EQ(topology.gpus[0].model, "Tesla K40m");
  ASSERT_EQ(topology.nics.size(), 3u);
  EXPECT_EQ(topology.nics[0].label(), "mlx5_0:1");
  EXPECT_EQ(topology.nics[0].state, PortState::kActive);
  EXPECT_EQ(topology.nics[1].name, "eth0");
  EXPECT_EQ(topology.nics[2].name, "eth1");
  EXPECT_EQ(topology.gpu_nic(0, 0), PathClass::kPhb);
  EXPECT_EQ(topology.gpu_nic(0, 1), PathClass::kPhb);
  const Locality* place = topology.locality_of(topology.gpus[0].where);
  ASSERT_NE(place, nullptr);
  EXPECT_EQ(place->numa_node, 1);
  EXPECT_EQ(place->cpuset, "8-15,24-31");
  EXPECT_TRUE(topology.switches.empty());
}

// POWER8 with four P100s: NVLink joins 0-1 and 2-3 (NVLinkBandwidth over nvml0-3); 0-1 sit on
// socket 0, 2-3 on socket 1; no NICs.
TEST(HwlocTestFiles, Power8NvlinkPairs) {
  const MachineTopology topology = load_fixture("power8gpudistances.xml");
  ASSERT_EQ(topology.gpus.size(), 4u);
  EXPECT_EQ(topology.gpus[0].name, "cuda0");
  EXPECT_EQ(topology.gpus[2].where.pci_bus_id, "000a:01:00.0");
  EXPECT_EQ(topology.gpu_gpu(0, 1), PathClass::kNvl);
  EXPECT_EQ(topology.gpu_gpu(2, 3), PathClass::kNvl);
  EXPECT_EQ(topology.gpu_gpu(0, 2), PathClass::kSys);
  EXPECT_EQ(topology.gpu_gpu(1, 3), PathClass::kSys);
  EXPECT_TRUE(topology.nics.empty());
  const NicPlan plan = assign_nics(topology, 2);
  EXPECT_EQ(plan.rails(), (std::vector<int>{-1, -1}));
  EXPECT_EQ(topology.locality_of(topology.gpus[3].where)->numa_node, 1);
}

}  // namespace
}  // namespace terse
