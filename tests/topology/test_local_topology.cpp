#include <gtest/gtest.h>

#include "topology/local_topology.h"
#include "topology/natural_order.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

// The only test that calls local_topology(), so its TERSE_TOPO_FILE is the one loaded even when
// the whole binary runs in one process.
TEST(LocalTopology, LoadedOnceFromTerseTopoFile) {
  ScopedEnv file("TERSE_TOPO_FILE", fixture_path("hgx-8gpu-8nic-2socket.xml"));
  const MachineTopology* first = local_topology();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->gpus.size(), 8u);
  EXPECT_EQ(local_topology(), first);
}

TEST(NaturalOrder, NumbersCompareByValue) {
  EXPECT_TRUE(natural_less("mlx5_2", "mlx5_10"));
  EXPECT_FALSE(natural_less("mlx5_10", "mlx5_2"));
  EXPECT_TRUE(natural_less("eth0", "eth1"));
  EXPECT_TRUE(natural_less("eth", "eth0"));
  EXPECT_TRUE(natural_less("eth9", "ib0"));
  EXPECT_FALSE(natural_less("eth01", "eth1"));
  EXPECT_FALSE(natural_less("eth1", "eth01"));
  EXPECT_FALSE(natural_less("a", "a"));
}

}  // namespace
}  // namespace terse
