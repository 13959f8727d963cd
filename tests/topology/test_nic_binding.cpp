// The NIC a rank's network UCX context is restricted to (transport/nic_binding.h): topology's
// choice for its local rank on a node with several NICs, nothing where there is no choice, and
// the local rank read from the launchers' environments. Expected NICs are read off the fixtures
// (hgx: GPU i and mlx5_i:1 share PCIe switch i; workstation: one dual-port NIC).
#include <gtest/gtest.h>

#include <string>

#include "topology_fixtures.h"
#include "transport/nic_binding.h"

namespace terse {
namespace {

TEST(NicBinding, EachLocalRankOfAnEightNicNodeGetsTheNicOnItsGpusSwitch) {
  const MachineTopology topology = load_fixture("hgx-8gpu-8nic-2socket.xml");
  for (int rank = 0; rank < 8; ++rank) {
    std::string why;
    EXPECT_EQ(net_devices_for_local_rank(topology, rank, 8, &why),
              "mlx5_" + std::to_string(rank) + ":1")
        << why;
    EXPECT_NE(why.find("PIX to GPU" + std::to_string(rank)), std::string::npos) << why;
    EXPECT_NE(why.find("rail " + std::to_string(rank)), std::string::npos) << why;
  }
  // Sixteen ranks on eight GPUs: ranks i and i + 8 drive GPU i and share its NIC.
  std::string why;
  EXPECT_EQ(net_devices_for_local_rank(topology, 11, 16, &why), "mlx5_3:1") << why;
}

TEST(NicBinding, NoRestrictionWithoutAChoiceOrALocalRank) {
  const MachineTopology topology = load_fixture("bcm-gen5-1gpu-1nic.xml");
  std::string why;
  EXPECT_EQ(net_devices_for_local_rank(topology, 0, 1, &why), "");
  EXPECT_NE(why.find("UCX chooses"), std::string::npos) << why;
  const MachineTopology hgx = load_fixture("hgx-8gpu-8nic-2socket.xml");
  EXPECT_EQ(net_devices_for_local_rank(hgx, 8, 8, &why), "");  // out of range
}

TEST(NicBinding, LocalRankComesFromTheLauncher) {
  ScopedEnv torch_rank("LOCAL_RANK", std::nullopt), torch_size("LOCAL_WORLD_SIZE", std::nullopt);
  ScopedEnv ompi_rank("OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt);
  ScopedEnv ompi_size("OMPI_COMM_WORLD_LOCAL_SIZE", std::nullopt);
  ScopedEnv mpich_rank("MPI_LOCALRANKID", std::nullopt),
      mpich_size("MPI_LOCALNRANKS", std::nullopt);
  ScopedEnv slurm_rank("SLURM_LOCALID", std::nullopt);
  ScopedEnv slurm_size("SLURM_NTASKS_PER_NODE", std::nullopt);
  int rank = -1, size = -1;
  EXPECT_FALSE(local_rank_from_launcher(&rank, &size));
  {
    ScopedEnv r("OMPI_COMM_WORLD_LOCAL_RANK", "3"), s("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    ASSERT_TRUE(local_rank_from_launcher(&rank, &size));
    EXPECT_EQ(rank, 3);
    EXPECT_EQ(size, 4);
  }
  {
    ScopedEnv r("LOCAL_RANK", "5"), s("LOCAL_WORLD_SIZE", "4");  // inconsistent: ignored
    EXPECT_FALSE(local_rank_from_launcher(&rank, &size));
  }
  {
    ScopedEnv r("LOCAL_RANK", "x1"), s("LOCAL_WORLD_SIZE", "4");
    EXPECT_FALSE(local_rank_from_launcher(&rank, &size));
  }
  {
    ScopedEnv r("LOCAL_RANK", "6"), s("LOCAL_WORLD_SIZE", "8");
    ScopedEnv file("TERSE_TOPO_FILE", fixture_path("hgx-8gpu-8nic-2socket.xml"));
    ScopedEnv devices("UCX_NET_DEVICES", std::nullopt);
    std::string why;
    // local_topology() is loaded once per process; this test binary may have loaded it before
    // with another file, so ask the pure function the same question it would.
    ASSERT_TRUE(local_rank_from_launcher(&rank, &size));
    EXPECT_EQ(
        net_devices_for_local_rank(load_fixture("hgx-8gpu-8nic-2socket.xml"), rank, size, &why),
        "mlx5_6:1");
    ScopedEnv user("UCX_NET_DEVICES", "mlx5_0:1");
    EXPECT_EQ(net_devices_for_this_process(&why), "");
    EXPECT_EQ(why, "UCX_NET_DEVICES is set");
  }
}

}  // namespace
}  // namespace terse
