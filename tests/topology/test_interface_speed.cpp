// sysfs reading against a directory laid out like /sys/class/net.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "topology/interface_speed.h"
#include "topology/live_details.h"

namespace terse {
namespace {

class FakeSysClassNet : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/terse_net_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }

  void add(const std::string& name, const char* speed, const char* state, bool hardware) {
    const std::string dir = root_ + "/" + name;
    mkdir(dir.c_str(), 0755);
    if (speed != nullptr) std::ofstream(dir + "/speed") << speed << "\n";
    if (state != nullptr) std::ofstream(dir + "/operstate") << state << "\n";
    if (hardware) mkdir((dir + "/device").c_str(), 0755);
  }

  std::string root_;
};

TEST_F(FakeSysClassNet, SpeedInGbitsAndUnknownAsZero) {
  add("eth0", "25000", "up", true);
  add("eth1", "-1", "down", true);
  add("eth2", "garbage", "unknown", true);
  add("eth3", nullptr, nullptr, true);
  EXPECT_DOUBLE_EQ(interface_gbps(root_, "eth0"), 25);
  EXPECT_EQ(interface_gbps(root_, "eth1"), 0);
  EXPECT_EQ(interface_gbps(root_, "eth2"), 0);
  EXPECT_EQ(interface_gbps(root_, "eth3"), 0);
  EXPECT_EQ(interface_gbps(root_, "missing"), 0);
  EXPECT_EQ(interface_gbps(root_, "../eth0"), 0);  // never leaves the directory
  EXPECT_EQ(interface_state(root_, "eth0"), PortState::kActive);
  EXPECT_EQ(interface_state(root_, "eth1"), PortState::kDown);
  EXPECT_EQ(interface_state(root_, "eth2"), PortState::kUnknown);
}

TEST_F(FakeSysClassNet, VirtualInterfacesHaveNoDevice) {
  add("lo", "-1", "unknown", false);
  add("eth0", "10000", "up", true);
  add("veth10", "10000", "up", false);
  add("veth2", nullptr, "up", false);
  EXPECT_EQ(virtual_interfaces(root_), (std::vector<std::string>{"veth2", "veth10"}));
  EXPECT_TRUE(virtual_interfaces(root_ + "/missing").empty());
}

TEST_F(FakeSysClassNet, EthernetNicsGetSpeedAndState) {
  add("eth0", "100000", "up", true);
  add("veth0", "10000", "up", false);
  MachineTopology topology;
  NicDevice eth0;
  eth0.name = "eth0";
  NicDevice rdma;
  rdma.name = "mlx5_0";
  rdma.kind = NicKind::kRdma;
  topology.nics = {rdma, eth0};
  apply_interface_details(root_, &topology);
  EXPECT_DOUBLE_EQ(topology.nics[1].gbps, 100);
  EXPECT_EQ(topology.nics[1].speed_source, "sysfs");
  EXPECT_EQ(topology.nics[1].state, PortState::kActive);
  EXPECT_EQ(topology.nics[0].gbps, 0);  // RDMA speeds come from ibverbs
  ASSERT_EQ(topology.other_interfaces.size(), 1u);
  EXPECT_EQ(topology.other_interfaces[0].name, "veth0");
  EXPECT_DOUBLE_EQ(topology.other_interfaces[0].gbps, 10);
}

}  // namespace
}  // namespace terse
