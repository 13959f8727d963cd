// terse_topo's text, as a user reads it.
#include <gtest/gtest.h>

#include <sstream>

#include "topology/topology_report.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

TEST(TopologyReport, MatrixAsNvidiaSmiTopoPrintsIt) {
  const MachineTopology topology = load_fixture("workstation-4gpu-1nic.xml");
  const std::vector<std::string> lines = lines_of(format_path_matrix(topology));
  ASSERT_EQ(lines.size(), 7u);  // header, 4 GPUs, 2 NIC ports
  EXPECT_EQ(words_of(lines[0]),
            (std::vector<std::string>{"GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "CPU",
                                      "Affinity", "NUMA", "Affinity"}));
  EXPECT_EQ(words_of(lines[1]), (std::vector<std::string>{"GPU0", "0000:03:00.0", "X", "NVL", "PHB",
                                                          "PHB", "PIX", "PIX", "0-7", "0"}));
  EXPECT_EQ(words_of(lines[3]), (std::vector<std::string>{"GPU2", "0000:12:00.0", "PHB", "PHB", "X",
                                                          "NVL", "PHB", "PHB", "0-7", "0"}));
  EXPECT_EQ(words_of(lines[6]), (std::vector<std::string>{"NIC1", "0000:05:00.0", "PIX", "PIX",
                                                          "PHB", "PHB", "LOC", "X", "0-7", "0"}));
}

TEST(TopologyReport, EverySection) {
  const MachineTopology topology = load_fixture("hgx-8gpu-8nic-2socket.xml");
  LinkModel model{{2e-6, 4e9}, {5e-6, 25e9}, "the source line"};
  const std::string text = format_topology_report(topology, assign_nics(topology, 8), model);
  for (const char* expected :
       {"GPU7: cuda7 0000:59:00.0, NVIDIA A100-SXM4-40GB", "NIC3: mlx5_3:1 0000:1a:00.0, RDMA",
        "Legend", "PXB  = ", "local rank 5: GPU5 -> NIC5 (mlx5_5:1, PIX), rail 5",
        "node 1: CPUs 8-15, 256.0 GiB", "Link model assumed: the source line",
        "inter-node: alpha 5 us, 25 GB/s"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
}

TEST(TopologyReport, AMachineWithoutGpusSaysSo) {
  MachineTopology topology;
  topology.source = "a laptop";
  topology.numa_nodes = {NumaNode{0, "0-3", 8ull << 30}};
  topology.other_interfaces = {NetInterface{"veth0", 0}};
  LinkModel model{{2e-6, 4e9}, {20e-6, 1.25e9}, "defaults"};
  const std::string text = format_topology_report(topology, assign_nics(topology, 1), model);
  EXPECT_EQ(format_path_matrix(topology), "");
  EXPECT_NE(text.find("no GPUs"), std::string::npos) << text;
  EXPECT_NE(text.find("veth0 (speed unknown)"), std::string::npos) << text;
  EXPECT_NE(text.find("node 0: CPUs 0-3, 8.0 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("local rank 0: no NIC"), std::string::npos) << text;
}

}  // namespace
}  // namespace terse
