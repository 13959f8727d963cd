// The link costs assumed: defaults, the NIC's speed, and the environment's overrides and
// refusals. Every test pins the variables it depends on (ScopedEnv), whatever the caller's
// environment holds.
#include <gtest/gtest.h>

#include <optional>

#include "common/result.h"
#include "topology/link_model.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

constexpr double kGbit = 1e9 / 8;  // bytes per second in one Gbit/s

struct CleanEnv {
  ScopedEnv net_gbps{"TERSE_NET_GBPS", std::nullopt};
  ScopedEnv net_latency{"TERSE_NET_LATENCY_US", std::nullopt};
  ScopedEnv shm_gbps{"TERSE_SHM_GBPS", std::nullopt};
  ScopedEnv shm_latency{"TERSE_SHM_LATENCY_US", std::nullopt};
  ScopedEnv ucx_tls{"UCX_TLS", std::nullopt};
};

NicDevice port(const char* name, NicKind kind, double gbps, PortState state = PortState::kActive) {
  NicDevice nic;
  nic.name = name;
  nic.kind = kind;
  nic.port = kind == NicKind::kRdma ? 1 : 0;
  nic.gbps = gbps;
  nic.state = state;
  return nic;
}

TEST(LinkModel, DefaultsWithoutATopology) {
  CleanEnv env;
  LinkModel model;
  ASSERT_EQ(assumed_link_model(nullptr, "", &model), Result::kSuccess) << last_error();
  EXPECT_DOUBLE_EQ(model.intra.latency_s, 2e-6);
  EXPECT_DOUBLE_EQ(model.intra.bytes_per_s, 4e9);
  EXPECT_DOUBLE_EQ(model.inter.latency_s, 20e-6);
  EXPECT_DOUBLE_EQ(model.inter.bytes_per_s, 10 * kGbit);
  EXPECT_NE(model.source.find("10 Gbit/s (assumed"), std::string::npos) << model.source;
  EXPECT_EQ(model.source.find('\n'), std::string::npos);
}

TEST(LinkModel, FastestActiveRdmaPortOverRdma) {
  CleanEnv env;
  MachineTopology topology;
  topology.nics = {port("mlx5_0", NicKind::kRdma, 100), port("mlx5_1", NicKind::kRdma, 200),
                   port("mlx5_2", NicKind::kRdma, 400, PortState::kDown),
                   port("eth0", NicKind::kEthernet, 25)};
  LinkModel model;
  ASSERT_EQ(assumed_link_model(&topology, "eth0", &model), Result::kSuccess) << last_error();
  EXPECT_DOUBLE_EQ(model.inter.bytes_per_s, 200 * kGbit);
  EXPECT_DOUBLE_EQ(model.inter.latency_s, 5e-6);
  EXPECT_NE(model.source.find("mlx5_1:1 200 Gbit/s (ibverbs)"), std::string::npos) << model.source;
}

TEST(LinkModel, UcxTlsWithoutVerbsMeansTcpOverTheInterface) {
  CleanEnv env;
  ScopedEnv tls("UCX_TLS", std::string("tcp,sm,self"));
  MachineTopology topology;
  topology.nics = {port("mlx5_0", NicKind::kRdma, 200), port("eth0", NicKind::kEthernet, 25),
                   port("eth1", NicKind::kEthernet, 100)};
  LinkModel model;
  ASSERT_EQ(assumed_link_model(&topology, "eth0", &model), Result::kSuccess) << last_error();
  EXPECT_DOUBLE_EQ(model.inter.bytes_per_s, 25 * kGbit);
  EXPECT_DOUBLE_EQ(model.inter.latency_s, 20e-6);
  // No interface named: the fastest Ethernet NIC of known speed.
  ASSERT_EQ(assumed_link_model(&topology, "", &model), Result::kSuccess) << last_error();
  EXPECT_DOUBLE_EQ(model.inter.bytes_per_s, 100 * kGbit);
  EXPECT_NE(model.source.find("eth1 100 Gbit/s (sysfs)"), std::string::npos) << model.source;
}

TEST(LinkModel, VirtualInterfaceSpeedAndUnknownSpeedOfAnRdmaNic) {
  CleanEnv env;
  MachineTopology topology;  // not live: nothing is read from this machine's sysfs
  topology.nics = {port("mlx5_0", NicKind::kRdma, 0)};  // from a file: speed unknown
  topology.other_interfaces = {NetInterface{"veth0", 1}};
  LinkModel model;
  ASSERT_EQ(assumed_link_model(&topology, "veth0", &model), Result::kSuccess) << last_error();
  EXPECT_DOUBLE_EQ(model.inter.bytes_per_s, 1 * kGbit);
  EXPECT_DOUBLE_EQ(model.inter.latency_s, 5e-6);  // RDMA, even at an unknown speed
}

TEST(LinkModel, EnvironmentOverrides) {
  CleanEnv env;
  ScopedEnv net("TERSE_NET_GBPS", std::string("1"));
  ScopedEnv net_latency("TERSE_NET_LATENCY_US", std::string("50"));
  ScopedEnv shm("TERSE_SHM_GBPS", std::string("80"));
  ScopedEnv shm_latency("TERSE_SHM_LATENCY_US", std::string("0.5"));
  MachineTopology topology;
  topology.nics = {port("mlx5_0", NicKind::kRdma, 200)};
  LinkModel model;
  ASSERT_EQ(assumed_link_model(&topology, "", &model), Result::kSuccess) << last_error();
  EXPECT_DOUBLE_EQ(model.inter.bytes_per_s, 1 * kGbit);
  EXPECT_DOUBLE_EQ(model.inter.latency_s, 50e-6);
  EXPECT_DOUBLE_EQ(model.intra.bytes_per_s, 10e9);
  EXPECT_DOUBLE_EQ(model.intra.latency_s, 0.5e-6);
  EXPECT_NE(model.source.find("TERSE_NET_GBPS"), std::string::npos) << model.source;
  EXPECT_NE(model.source.find("TERSE_SHM_LATENCY_US"), std::string::npos) << model.source;
}

TEST(LinkModel, ZeroLatencyIsAllowed) {
  CleanEnv env;
  ScopedEnv latency("TERSE_NET_LATENCY_US", std::string("0"));
  LinkModel model;
  ASSERT_EQ(assumed_link_model(nullptr, "", &model), Result::kSuccess) << last_error();
  EXPECT_EQ(model.inter.latency_s, 0);
}

struct Refusal {
  const char* variable;
  const char* value;
};

TEST(LinkModel, BadValuesAreRefusedNamingTheVariable) {
  const Refusal refusals[] = {
      {"TERSE_NET_GBPS", "0"},          {"TERSE_NET_GBPS", "-5"},
      {"TERSE_NET_GBPS", "10G"},        {"TERSE_NET_GBPS", "fast"},
      {"TERSE_NET_GBPS", "nan"},        {"TERSE_NET_GBPS", "inf"},
      {"TERSE_NET_GBPS", "1e9"},        {"TERSE_SHM_GBPS", "0"},
      {"TERSE_NET_LATENCY_US", "-1"},   {"TERSE_NET_LATENCY_US", "5us"},
      {"TERSE_SHM_LATENCY_US", "1e12"}, {"TERSE_SHM_LATENCY_US", " "},
  };
  for (const Refusal& refusal : refusals) {
    CleanEnv env;
    ScopedEnv bad(refusal.variable, std::string(refusal.value));
    LinkModel model;
    EXPECT_EQ(assumed_link_model(nullptr, "", &model), Result::kInvalidArgument)
        << refusal.variable << "=" << refusal.value;
    EXPECT_NE(std::string(last_error()).find(std::string(refusal.variable) + "=" + refusal.value),
              std::string::npos)
        << last_error();
  }
  CleanEnv env;
  EXPECT_EQ(assumed_link_model(nullptr, "", nullptr), Result::kInvalidArgument);
}

TEST(LinkModel, UcxTlsReading) {
  EXPECT_TRUE(ucx_tls_allows_rdma(nullptr));
  EXPECT_TRUE(ucx_tls_allows_rdma(""));
  EXPECT_TRUE(ucx_tls_allows_rdma("rc,sm,self"));
  EXPECT_TRUE(ucx_tls_allows_rdma("dc_x"));
  EXPECT_TRUE(ucx_tls_allows_rdma("all"));
  EXPECT_TRUE(ucx_tls_allows_rdma("ib"));
  EXPECT_TRUE(ucx_tls_allows_rdma("^tcp"));
  EXPECT_FALSE(ucx_tls_allows_rdma("tcp"));
  EXPECT_FALSE(ucx_tls_allows_rdma("sm,self"));
  EXPECT_FALSE(ucx_tls_allows_rdma("^ib,cuda"));
}

}  // namespace
}  // namespace terse
