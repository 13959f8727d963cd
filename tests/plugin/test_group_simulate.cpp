// ncclGroupSimulateEnd through the NCCL API of libterse.so (plugin/group_calls.cpp): simInfo
// read, checked and refused as NCCL does (a null one runs the group, a bad magic closes and
// discards it, after a refused call of the group is reported), a group outside of which it is
// called refused, an empty group's estimate left as the caller set it, a nested simulated end
// closing one level only (ranks as threads); and, with
// ranks as processes (rank_process/simulate_scenario.cpp), every estimate equal to the cost
// model written out here from the figures the test pins (cost_model.h's rules), the whole
// group's estimate the sum of its calls', a larger tensor's estimate larger, two calls of a
// tensor in one group planned at consecutive steps, every buffer and statistic untouched, and
// the tensor's next real step equal to the reference model that never saw the simulated one
// (residual memory, tensor step and operation numbers unmoved).
#include <gtest/gtest.h>
#include <nccl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "model/compressed_model.h"
#include "plugin_ranks.h"
#include "rank_process/plugin_rank_protocol.h"
#include "rank_processes.h"
#include "transport_test_support.h"

namespace {

using plugin_test::failed;
using plugin_test::run_ranks;
using terse::test::ScopedEnv;

// What NCCL does with simInfo (src/group.cc, ncclGroupEndInternal): a null simInfo ends the
// group as ncclGroupEnd does, and it runs.
TEST(PluginGroupSimulate, ANullSimInfoRunsTheGroup) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  ScopedEnv policy("TERSE_POLICY", nullptr);
  const size_t count = 64;
  const std::string failure = run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, 1.0f + rank), recv(count, -1.0f);
    if (failed(ncclGroupStart(), "ncclGroupStart") ||
        failed(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr),
               "ncclAllReduce") ||
        failed(ncclGroupSimulateEnd(nullptr), "ncclGroupSimulateEnd(nullptr)")) {
      return;
    }
    for (float value : recv) ASSERT_EQ(value, 3.0f);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the group is still open";
  });
  EXPECT_EQ(failure, "");
}

// The inits of a group a bad magic discards are dropped too, as NCCL drops its group's jobs:
// the communicators stay uncreated (their calls refused, saying so) and can be destroyed.
TEST(PluginGroupSimulate, ABadMagicDropsTheGroupsInits) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(ncclCommInitRank(&comms[rank], 2, id, rank), ncclSuccess)
        << ncclGetLastError(nullptr);
  }
  ncclSimInfo_t unmarked = NCCL_SIM_INFO_INITIALIZER;
  unmarked.magic = 0;
  EXPECT_EQ(ncclGroupSimulateEnd(&unmarked), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the refused group is still open";
  for (ncclComm_t comm : comms) {
    int count = 0;
    EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not created"), std::string::npos)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << ncclGetLastError(nullptr);
  }
}

// A simInfo without NCCL_SIM_INFO_INITIALIZER's magic: refused, and the group is closed with
// nothing of it run (NCCL's failed group end). The ranks stay in step: the next call meets.
TEST(PluginGroupSimulate, ABadMagicClosesAndDiscardsTheGroup) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  ScopedEnv policy("TERSE_POLICY", nullptr);
  const size_t count = 64;
  const std::string failure = run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, 1.0f + rank), recv(count, -1.0f);
    if (failed(ncclGroupStart(), "ncclGroupStart") ||
        failed(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr),
               "ncclAllReduce")) {
      return;
    }
    ncclSimInfo_t unmarked = NCCL_SIM_INFO_INITIALIZER;
    unmarked.magic = 0;
    EXPECT_EQ(ncclGroupSimulateEnd(&unmarked), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("simInfo->magic"), std::string::npos)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(unmarked.estimatedTime, NCCL_UNDEF_FLOAT);
    for (float value : recv) ASSERT_EQ(value, -1.0f) << "a refused simulation ran the call";
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the refused group is still open";
    if (failed(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr),
               "ncclAllReduce after the refused group")) {
      return;
    }
    for (float value : recv) ASSERT_EQ(value, 3.0f);
  });
  EXPECT_EQ(failure, "");
}

// NCCL reads the caller's `size` bytes of simInfo (at most the whole struct) and writes back as
// many: one too small to hold the magic has none; one that holds the magic but not
// estimatedTime is simulated and gets no estimate.
TEST(PluginGroupSimulate, ASmallSimInfoIsReadAsNcclReadsIt) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  ScopedEnv policy("TERSE_POLICY", nullptr);
  const size_t count = 64;
  const std::string failure = run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, 1.0f + rank), recv(count, -1.0f);
    const auto simulate_with = [&](size_t size, ncclSimInfo_t* info) {
      *info = NCCL_SIM_INFO_INITIALIZER;
      info->size = size;
      ncclResult_t result = ncclGroupStart();
      if (result == ncclSuccess) {
        result =
            ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr);
      }
      return result == ncclSuccess ? ncclGroupSimulateEnd(info) : result;
    };
    ncclSimInfo_t without_magic, without_estimate;
    EXPECT_EQ(simulate_with(offsetof(ncclSimInfo_t, magic), &without_magic), ncclInvalidArgument);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the refused group is still open";
    EXPECT_EQ(simulate_with(offsetof(ncclSimInfo_t, estimatedTime), &without_estimate), ncclSuccess)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(without_estimate.estimatedTime, NCCL_UNDEF_FLOAT);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the simulated group is still open";
    for (float value : recv) ASSERT_EQ(value, -1.0f) << "a simulation ran the call";
  });
  EXPECT_EQ(failure, "");
}

// NCCL reports a group's refused call before it reads simInfo, and closes the group.
TEST(PluginGroupSimulate, ARefusedCallIsReportedBeforeTheMagic) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  ScopedEnv policy("TERSE_POLICY", nullptr);
  const size_t count = 64;
  const std::string failure = run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, 1.0f + rank), recv(count, -1.0f);
    if (failed(ncclGroupStart(), "ncclGroupStart")) return;
    EXPECT_EQ(ncclAllReduce(send.data(), recv.data(), count, static_cast<ncclDataType_t>(99),
                            ncclSum, comm, nullptr),
              ncclInvalidArgument);
    ncclSimInfo_t unmarked = NCCL_SIM_INFO_INITIALIZER;
    unmarked.magic = 0;
    EXPECT_EQ(ncclGroupSimulateEnd(&unmarked), ncclInvalidArgument);
    const std::string error = ncclGetLastError(nullptr);
    EXPECT_NE(error.find("a call in it failed"), std::string::npos) << error;
    EXPECT_NE(error.find("datatype 99"), std::string::npos) << error;
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the refused group is still open";
  });
  EXPECT_EQ(failure, "");
}

TEST(PluginGroupSimulate, OutsideAGroupIsInvalidUsage) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("without a matching ncclGroupStart"),
            std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(info.estimatedTime, NCCL_UNDEF_FLOAT);
}

// As NCCL: a group without collectives leaves estimatedTime as the caller set it.
TEST(PluginGroupSimulate, AnEmptyGroupLeavesTheEstimateAsItWas) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(info.estimatedTime, NCCL_UNDEF_FLOAT);
}

// As NCCL: a simulated end of an inner level only closes it, whatever simInfo is (null, or
// without the magic); the outermost ncclGroupEnd runs the whole group.
TEST(PluginGroupSimulate, ANestedSimulatedEndClosesOneLevel) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  ScopedEnv policy("TERSE_POLICY", nullptr);
  const size_t count = 100;
  const std::string failure = run_ranks(3, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count, 2.0f * rank), recv(count, -1.0f);
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    ncclSimInfo_t unmarked = NCCL_SIM_INFO_INITIALIZER;
    unmarked.magic = 0;
    for (int level = 0; level < 4; ++level) {
      if (failed(ncclGroupStart(), "ncclGroupStart")) return;
    }
    if (failed(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr),
               "ncclAllReduce") ||
        failed(ncclGroupSimulateEnd(&info), "ncclGroupSimulateEnd") ||
        failed(ncclGroupSimulateEnd(nullptr), "ncclGroupSimulateEnd(nullptr)") ||
        failed(ncclGroupSimulateEnd(&unmarked), "ncclGroupSimulateEnd(unmarked)")) {
      return;
    }
    EXPECT_EQ(info.estimatedTime, NCCL_UNDEF_FLOAT);
    EXPECT_EQ(unmarked.estimatedTime, NCCL_UNDEF_FLOAT);
    for (float value : recv) ASSERT_EQ(value, -1.0f);
    if (failed(ncclGroupEnd(), "ncclGroupEnd")) return;
    for (float value : recv) ASSERT_EQ(value, 6.0f);
  });
  EXPECT_EQ(failure, "");
}

// ---- ranks as processes, against the cost model ----

// What the test pins: shared memory at 8 Gbit/s and 20 us, and the codecs' speeds.
constexpr double kLatency = 20e-6;
constexpr double kBandwidth = 8e9 / 8;  // bytes per second
constexpr double kEncode = 1.6e9, kDecode = 3.1e9, kReduce = 5e9;
int ceil_log2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

// The share of a core each rank gets: every rank runs on this machine (planner.h).
double cpu_share(int nranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::min(1.0, static_cast<double>(std::max(1, cores)) / nranks);
}

// int8's message for `count` fp32 values (int_quant_codecs.cpp): the 32-byte header, an fp32
// scale and minimum per block of 256, a byte per value.
double int8_wire_bytes(size_t count) {
  return 32.0 + 8.0 * static_cast<double>((count + 255) / 256) + static_cast<double>(count);
}

// Scatter-reduce-allgather of int8 with error feedback on one node (cost_model.h): two
// all-to-all phases of a 1/n share of the message, each (n - 1) latencies (the cores copy one
// message after another; the pipeline's pieces change no latency on one node) and the bytes
// through the copy; the encodes (residual added: one more
// pass at the reduction's speed) of the tensor and of the owned chunk, the decodes of the n
// versions of the chunk and of the whole result; wire and codec add up over shared memory.
double sra_seconds(size_t count, int n) {
  const double share = cpu_share(n);
  const double b = 4.0 * static_cast<double>(count), w = int8_wire_bytes(count);
  const double encode = 1 / (kEncode * share) + 1 / (kReduce * share);
  const double decode = 1 / (kDecode * share);
  const double wire = 2 * (n - 1) * (w / n) / kBandwidth;
  const double codec = encode * b * (1.0 + 1.0 / n) + decode * 2.0 * b;
  return 2 * (n - 1) * kLatency + wire + codec;
}

// The uncompressed ring of 4-byte values, int32 or fp32 (2 KiB per rank and more,
// allreduce_selection.h): 2(n - 1) steps, 2(n - 1)/n of the buffer through the copy,
// (n - 1)/n of it added (as fp32 bytes).
double ring_seconds(size_t count, int n) {
  const double raw = 4.0 * static_cast<double>(count);
  EXPECT_GE(raw / n, 2048.0) << "the ring's regime";
  return 2 * (n - 1) * kLatency + 2.0 * (n - 1) / n * raw / kBandwidth +
         (n - 1.0) / n * raw / (kReduce * cpu_share(n));
}

// The binomial broadcast (below 64 KiB): ceil(log2 n) hops of the whole buffer.
double broadcast_seconds(size_t count, int n) {
  EXPECT_LT(4.0 * static_cast<double>(count), 64 << 10) << "the tree's regime";
  return ceil_log2(n) * (kLatency + 4.0 * static_cast<double>(count) / kBandwidth);
}

// A send and a receive: a latency and the message each.
double send_recv_seconds(size_t count) {
  return 2 * (kLatency + 4.0 * static_cast<double>(count) / kBandwidth);
}

std::map<std::string, std::string> read_values(const std::string& path) {
  std::map<std::string, std::string> values;
  std::ifstream file(path);
  std::string name, value;
  while (file >> name >> value) values[name] = value;
  return values;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
}

class PluginGroupSimulateProcesses : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/terse_simulate_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    FILE* table = fopen((dir_ + "/speeds.txt").c_str(), "w");
    ASSERT_NE(table, nullptr);
    fprintf(table, "int8 %g %g\nreduce %g\n", kEncode / 1e9, kDecode / 1e9, kReduce / 1e9);
    fclose(table);
  }
  void TearDown() override {
    if (!dir_.empty()) {
      EXPECT_EQ(system(("rm -rf " + dir_).c_str()), 0);
    }
  }
  std::string dir_;
};

TEST_P(PluginGroupSimulateProcesses, EstimatesTheCostModelAndRunsNothing) {
  const int n = GetParam();
  const std::string speeds = dir_ + "/speeds.txt";
  ScopedEnv ifname("TERSE_SOCKET_IFNAME", "lo");
  ScopedEnv family("TERSE_SOCKET_FAMILY", "AF_INET");
  ScopedEnv comm_id("TERSE_COMM_ID", nullptr);
  ScopedEnv nccl_comm_id("NCCL_COMM_ID", nullptr);
  ScopedEnv timeout("TERSE_TIMEOUT_S", "20");
  ScopedEnv codec("TERSE_CODEC", "int8");
  ScopedEnv policy("TERSE_POLICY", nullptr);
  ScopedEnv algorithm("TERSE_COMPRESSED_ALGO", "sra");
  ScopedEnv dense("TERSE_ALGO", nullptr);
  ScopedEnv pieces("TERSE_PIECE_BYTES", nullptr);
  ScopedEnv compressed_pieces("TERSE_COMPRESSED_PIECE_BYTES", nullptr);
  ScopedEnv hierarchy("TERSE_HIERARCHICAL", nullptr);
  ScopedEnv hostid("TERSE_HOSTID", nullptr);
  ScopedEnv nodes("PLUGIN_TEST_RANKS_PER_NODE", nullptr);
  ScopedEnv shm_gbps("TERSE_SHM_GBPS", "8");
  ScopedEnv shm_latency("TERSE_SHM_LATENCY_US", "20");
  ScopedEnv table("TERSE_CODEC_SPEED", speeds.c_str());
  // The closed forms below are on the figures given; the real calls between the simulations
  // would otherwise teach the planner others (planner.h, Learning).
  ScopedEnv nominal("TERSE_PLANNER_LEARN", "off");
  ScopedEnv results("PLUGIN_TEST_RESULT_DIR", dir_.c_str());

  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<terse::test::CommandLine> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back({TERSE_PLUGIN_RANK_PROCESS_PATH, plugin_test::kScenarioSimulate,
                     std::to_string(r), std::to_string(n), plugin_test::unique_id_to_hex(id)});
  }
  const auto processes = terse::test::run_processes(ranks, 60);
  ASSERT_EQ(processes.size(), static_cast<size_t>(n));
  for (const auto& process : processes) {
    ASSERT_TRUE(process.exited && process.exit_code == plugin_test::kPluginRankOk)
        << terse::test::describe(process);
  }

  const double tensor = sra_seconds(plugin_test::kSimulateCount, n) * 1e6;
  const double broadcast = broadcast_seconds(plugin_test::kSimulateBroadcastCount, n) * 1e6;
  const double integers = ring_seconds(plugin_test::kSimulateIntCount, n) * 1e6;
  const double p2p = send_recv_seconds(plugin_test::kSimulateP2pCount) * 1e6;
  // estimatedTime is a float: its rounding, and the sums made in another order.
  const auto near = [](double value) { return 1e-5 * value; };
  std::vector<std::map<std::string, std::string>> values;
  for (int r = 0; r < n; ++r) {
    values.push_back(read_values(dir_ + "/rank" + std::to_string(r) + ".txt"));
    const auto& v = values.back();
    const auto number = [&](const char* name) {
      EXPECT_EQ(v.count(name), 1u) << "rank " << r << " wrote no " << name;
      return v.count(name) ? std::stod(v.at(name)) : 0.0;
    };
    EXPECT_NEAR(number("tensor"), tensor, near(tensor)) << "rank " << r;
    EXPECT_NEAR(number("broadcast"), broadcast, near(broadcast)) << "rank " << r;
    EXPECT_NEAR(number("int"), integers, near(integers)) << "rank " << r;
    EXPECT_NEAR(number("p2p"), p2p, near(p2p)) << "rank " << r;
    const double sum = tensor + broadcast + integers + p2p;
    EXPECT_NEAR(number("whole"), sum, near(sum)) << "rank " << r;
    EXPECT_NEAR(number("whole"),
                number("tensor") + number("broadcast") + number("int") + number("p2p"), near(sum))
        << "rank " << r << ": the group's estimate is the sum of its calls'";
    EXPECT_GT(number("larger"), number("tensor")) << "rank " << r;
    // Steps 2 and 3 of the tensor in one group: the second is planned at the step after the
    // first (every second step compresses), not at the same one.
    const double twice = tensor + ring_seconds(plugin_test::kSimulateCount, n) * 1e6;
    EXPECT_NEAR(number("twice"), twice, near(twice)) << "rank " << r;
    // The real step 1 ran the plan the simulation predicted, at the tensor's step 1: the
    // simulated step counted for nothing.
    EXPECT_NEAR(number("step1_predicted_seconds") * 1e6, number("tensor"), near(tensor));
    EXPECT_EQ(v.at("step0_step"), "0") << "rank " << r;
    EXPECT_EQ(v.at("step1_step"), "1") << "rank " << r;
    EXPECT_EQ(v.at("step1_algorithm"), "sra") << "rank " << r;
  }

  // Both real steps against the model, which sees steps 0 and 1 only: residuals carried from
  // step 0 straight to step 1.
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  ASSERT_TRUE(model.ok()) << model.error();
  for (int step = 0; step < 2; ++step) {
    std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      std::vector<float> input(plugin_test::kSimulateCount);
      for (size_t i = 0; i < input.size(); ++i) input[i] = plugin_test::simulate_input(r, step, i);
      inputs[static_cast<size_t>(r)].resize(input.size() * sizeof(float));
      std::memcpy(inputs[static_cast<size_t>(r)].data(), input.data(),
                  input.size() * sizeof(float));
    }
    const std::string prefix = "step" + std::to_string(step) + "_";
    terse::model::CallSpec spec;
    spec.algorithm = values[0].at(prefix + "algorithm");
    spec.count = plugin_test::kSimulateCount;
    spec.seed = std::stoull(values[0].at(prefix + "seed"));
    spec.step = std::stoull(values[0].at(prefix + "step"));
    spec.piece_bytes = std::stoull(values[0].at(prefix + "piece_bytes"));
    const terse::model::Expected expected = model.call(spec, inputs);
    for (int r = 0; r < n; ++r) {
      const std::vector<uint8_t> output =
          read_bytes(dir_ + "/rank" + std::to_string(r) + "_step" + std::to_string(step) + ".bin");
      ASSERT_EQ(output.size(), plugin_test::kSimulateCount * sizeof(float));
      const terse::model::Comparison c = terse::model::compare(
          expected, terse::DType::kFloat32, output.data(), plugin_test::kSimulateCount);
      EXPECT_EQ(c.mismatches, 0u) << "rank " << r << " step " << step << ": " << c.first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, PluginGroupSimulateProcesses, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
