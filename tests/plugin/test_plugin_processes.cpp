// The NCCL API of libterse.so with ranks as processes: plugin_rank_process, an application that
// includes only <nccl.h> and links only libterse, spawned once per rank with the unique id on
// its command line (as the hex of ncclUniqueId) or found through TERSE_COMM_ID. The ranks check
// their own results (rank_process/plugin_rank_protocol.h) and report through exit codes; a
// failure shows what each rank wrote to stderr. Bootstrap on IPv4 loopback, as every multi-rank
// test; TERSE_UCX_ERROR_MODE at its default.
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <string>
#include <vector>

#include "rank_process/plugin_rank_protocol.h"
#include "rank_process/residual_admission_scenario.h"
#include "rank_processes.h"
#include "transport_test_support.h"

namespace {

using terse::test::CommandLine;
using terse::test::RankProcessResult;
using terse::test::ScopedEnv;

// Far beyond what any scenario needs: the test's own deadline, after which ranks are killed.
constexpr double kSecondsAllowed = 60;

class PluginProcesses : public ::testing::Test {
 protected:
  // Runs `scenario` on ranks `first` to `first + count - 1` of `nranks` (count -1: all), with
  // `id_argument`; `expendable_rank` as run_processes takes it.
  static std::vector<RankProcessResult> run(const char* scenario, int nranks,
                                            const std::string& id_argument, int first = 0,
                                            int count = -1, int expendable_rank = -1) {
    std::vector<CommandLine> ranks;
    for (int rank = first; rank < first + (count < 0 ? nranks : count); ++rank) {
      ranks.push_back({TERSE_PLUGIN_RANK_PROCESS_PATH, scenario, std::to_string(rank),
                       std::to_string(nranks), id_argument});
    }
    return terse::test::run_processes(ranks, kSecondsAllowed, expendable_rank);
  }

  // A fresh id from this process (its bootstrap root serves the ranks), as hex.
  static std::string new_id() {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
    return plugin_test::unique_id_to_hex(id);
  }

  static void expect_all_ok(const std::vector<RankProcessResult>& results, size_t nranks) {
    ASSERT_EQ(results.size(), nranks);
    for (const RankProcessResult& result : results) {
      EXPECT_TRUE(result.exited && result.exit_code == plugin_test::kPluginRankOk)
          << describe(result);
    }
  }

  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv error_mode_{"TERSE_UCX_ERROR_MODE", nullptr};
  // A hang fails the test at this deadline instead of running to the suite's.
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "20"};
};

class PluginProcessRanks : public PluginProcesses, public ::testing::WithParamInterface<int> {};

TEST_P(PluginProcessRanks, CollectivesWithTheIdOnTheCommandLine) {
  expect_all_ok(run(plugin_test::kScenarioCollectives, GetParam(), new_id()), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ranks, PluginProcessRanks, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Every rank calls ncclGetUniqueId itself: TERSE_COMM_ID makes it the same id everywhere, and
// rank 0 starts the bootstrap root at that address. The port stays bound here until the ranks
// are done, so that no other process takes it before rank 0 binds it (transport_test_support.h).
TEST_F(PluginProcesses, CollectivesWithTerseCommId) {
  const terse::test::ReservedPort reserved("127.0.0.1");
  ASSERT_GT(reserved.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(reserved.port());
  ScopedEnv comm_id("TERSE_COMM_ID", address.c_str());
  expect_all_ok(run(plugin_test::kScenarioCollectives, 3, plugin_test::kIdFromEnvironment), 3);
}

// The last rank SIGKILLs itself between two collectives; the others must see ncclRemoteError
// within TERSE_TIMEOUT_S (plus slack), a message naming a rank, and abort promptly. With a codec
// the allreduces run compressed (int8 through recursive doubling at this size): the compressed
// algorithms' waits have the same deadlines.
class PluginKilledRank : public PluginProcesses,
                         public ::testing::WithParamInterface<const char*> {};

TEST_P(PluginKilledRank, TurnsIntoRemoteErrorOnTheOthers) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "4");
  ScopedEnv codec("TERSE_CODEC", GetParam()[0] == '\0' ? nullptr : GetParam());
  const int nranks = 3;
  const std::vector<RankProcessResult> results =
      run(plugin_test::kScenarioKilled, nranks, new_id());
  ASSERT_EQ(results.size(), static_cast<size_t>(nranks));
  for (int rank = 0; rank < nranks - 1; ++rank) {
    EXPECT_TRUE(results[rank].exited && results[rank].exit_code == plugin_test::kPluginRankOk)
        << describe(results[rank]);
  }
  EXPECT_EQ(results[nranks - 1].signal, SIGKILL)
      << "the victim was meant to kill itself: " << describe(results[nranks - 1]);
}

INSTANTIATE_TEST_SUITE_P(Codecs, PluginKilledRank, ::testing::Values("", "int8"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param[0] == '\0' ? "uncompressed" : info.param);
                         });

// ncclCommAbort from another thread ends an allreduce blocked on a rank that never joins it, and
// returns promptly (that rank idles until it is killed here).
TEST_F(PluginProcesses, AbortEndsABlockedCollective) {
  const int nranks = 3;
  const std::vector<RankProcessResult> results =
      run(plugin_test::kScenarioAbort, nranks, new_id(), 0, -1, /*expendable_rank=*/nranks - 1);
  ASSERT_EQ(results.size(), static_cast<size_t>(nranks));
  for (int rank = 0; rank < nranks - 1; ++rank) {
    EXPECT_TRUE(results[rank].exited && results[rank].exit_code == plugin_test::kPluginRankOk)
        << describe(results[rank]);
  }
  EXPECT_TRUE(results[nranks - 1].killed_by_parent) << describe(results[nranks - 1]);
}

// ncclCommRevoke, then ncclCommShrink, or ncclCommShrink with NCCL_SHRINK_ABORT alone, end an
// allreduce stuck on rank 1 (idle for ever, or killed) and give the other three a communicator
// of their own whose allreduce is their exact sum (rank_process/shrink_scenario.cpp). The
// timeout is far longer than the test lets the stuck call wait: only the revoke can end it.
class PluginShrink : public PluginProcesses, public ::testing::WithParamInterface<const char*> {};

TEST_P(PluginShrink, SurvivorsFormACommunicatorWithoutTheLostRank) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "50");
  ScopedEnv how("PLUGIN_TEST_SHRINK", GetParam());
  const bool killed = std::string(GetParam()) == "abort";
  const int nranks = 4;
  const std::vector<RankProcessResult> results =
      run(plugin_test::kScenarioShrink, nranks, new_id(), 0, -1, /*expendable_rank=*/1);
  ASSERT_EQ(results.size(), static_cast<size_t>(nranks));
  for (int rank = 0; rank < nranks; ++rank) {
    if (rank == 1) continue;
    EXPECT_TRUE(results[rank].exited && results[rank].exit_code == plugin_test::kPluginRankOk)
        << describe(results[rank]);
  }
  if (killed) {
    EXPECT_EQ(results[1].signal, SIGKILL) << describe(results[1]);
  } else {
    EXPECT_TRUE(results[1].killed_by_parent) << describe(results[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(Ways, PluginShrink, ::testing::Values("revoke", "abort"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// A rank presenting a wrong secret is refused (ncclCommInitRank fails within TERSE_TIMEOUT_S
// and says why) and does not disturb the job it tried to join: the rightful ranks then form it
// at the same root. terse's id holds its secret at bytes 32-39 (transport/unique_id.h).
TEST_F(PluginProcesses, AWrongSecretIsRefusedAndTheJobStillForms) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "10");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  ncclUniqueId stranger = id;
  stranger.internal[32] = static_cast<char>(stranger.internal[32] ^ 0x5a);
  expect_all_ok(run(plugin_test::kScenarioStranger, 2, plugin_test::unique_id_to_hex(stranger),
                    /*first=*/1, /*count=*/1),
                1);
  expect_all_ok(run(plugin_test::kScenarioCollectives, 2, plugin_test::unique_id_to_hex(id)), 2);
}

}  // namespace

// Compressed allreduces with ranks as processes (compressed_scenario.cpp): every rank holds its
// result within the codec's stated bound through the algorithm the statistics name.
struct CompressedRun {
  const char* codec;
  int nranks;
  int ranks_per_node;  // 0: one node (no TERSE_HOSTID)
  bool hierarchical;   // whether the nodes make the engine go hierarchical
};

class PluginCompressedProcesses : public PluginProcesses,
                                  public ::testing::WithParamInterface<CompressedRun> {};

TEST_P(PluginCompressedProcesses, WithinTheStatedBound) {
  const CompressedRun& run_case = GetParam();
  const std::string per_node = std::to_string(run_case.ranks_per_node);
  ScopedEnv codec("TERSE_CODEC", run_case.codec);
  ScopedEnv nodes("PLUGIN_TEST_RANKS_PER_NODE",
                  run_case.ranks_per_node > 0 ? per_node.c_str() : nullptr);
  ScopedEnv expect("PLUGIN_TEST_EXPECT_HIERARCHICAL", run_case.hierarchical ? "1" : "0");
  // Emulated nodes behind a 1 Gbit/s network: there compression and the hierarchy pay (the
  // planner weighs them; on shared memory it would not compress at all).
  ScopedEnv network("TERSE_NET_GBPS", run_case.ranks_per_node > 0 ? "1" : nullptr);
  ScopedEnv hostid("TERSE_HOSTID", nullptr);
  ScopedEnv hierarchy("TERSE_HIERARCHICAL", nullptr);
  expect_all_ok(run(plugin_test::kScenarioCompressed, run_case.nranks, new_id()),
                static_cast<size_t>(run_case.nranks));
}

// The residual-admission scenario with ranks as processes (residual_admission_scenario.h): three
// 4 MiB sign tensors under a TERSE_MEMORY_MAX_BYTES for two. Every rank holds the admitted two
// within a few percent of the inputs and the third exact, reports the same counters, and warns
// once, naming the tensor and the cap.
TEST_F(PluginProcesses, ResidualMemoryAdmitsWhatFitsAndWarnsOncePerRankAboutTheRest) {
  ScopedEnv codec("TERSE_CODEC", "sign");
  ScopedEnv cap("TERSE_MEMORY_MAX_BYTES", plugin_test::kAdmissionCap);
  ScopedEnv idle("TERSE_MEMORY_IDLE_STEPS", nullptr);
  ScopedEnv debug("TERSE_DEBUG", "WARN");
  ScopedEnv debug_file("TERSE_DEBUG_FILE", nullptr);
  ScopedEnv policy("TERSE_POLICY", nullptr);
  ScopedEnv algo("TERSE_COMPRESSED_ALGO", nullptr);
  ScopedEnv hostid("TERSE_HOSTID", nullptr);
  const int nranks = plugin_test::kAdmissionRanks;
  const std::vector<RankProcessResult> results =
      run(plugin_test::kScenarioResidualAdmission, nranks, new_id());
  expect_all_ok(results, static_cast<size_t>(nranks));
  // What a line holds, from `prefix` to its end, in `output` ("" when absent).
  auto line_after = [](const std::string& output, const std::string& prefix) {
    const size_t at = output.find(prefix);
    if (at == std::string::npos) return std::string();
    return output.substr(at, output.find('\n', at) - at);
  };
  const std::string counters = line_after(results[0].output, "admission counters: ");
  EXPECT_NE(counters, "") << describe(results[0]);
  for (const RankProcessResult& result : results) {
    EXPECT_EQ(line_after(result.output, "admission counters: "), counters) << describe(result);
    size_t warnings = 0;
    for (size_t at = result.output.find("TERSE WARN"); at != std::string::npos;
         at = result.output.find("TERSE WARN", at + 1)) {
      const std::string line = result.output.substr(at, result.output.find('\n', at) - at);
      ++warnings;
      EXPECT_NE(line.find("residual memory does not admit tensor 'layer2.weight'"),
                std::string::npos)
          << line;
      EXPECT_NE(line.find("cap of 10485760 bytes (TERSE_MEMORY_MAX_BYTES)"), std::string::npos)
          << line;
      EXPECT_NE(line.find("reduced uncompressed"), std::string::npos) << line;
    }
    EXPECT_EQ(warnings, 1u) << describe(result);
  }
}

// `auto` with ranks whose speed tables disagree: rank 0 finds int8 fast and int4 slow, rank 1
// the reverse, so each alone would plan another codec and their messages would not match. The
// planner agrees on the slowest rank's figures first: both ranks run the same codec and
// algorithm, and the result holds within its bound.
TEST_F(PluginProcesses, AutoPlansAgreeWhenTheRanksMeasuredDifferentSpeeds) {
  char dir_template[] = "/tmp/terse_speed_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const char* tables[] = {"int8 20 20\nint4 1 1\nfp16 0.5 0.5\nbf16 0.5 0.5\nreduce 5\n",
                          "int8 1 1\nint4 20 20\nfp16 0.5 0.5\nbf16 0.5 0.5\nreduce 5\n"};
  for (int rank = 0; rank < 2; ++rank) {
    FILE* file = fopen((dir + "/rank" + std::to_string(rank) + ".txt").c_str(), "w");
    ASSERT_NE(file, nullptr);
    fputs(tables[rank], file);
    fclose(file);
  }
  ScopedEnv codec("TERSE_CODEC", "auto:max_rel_err=0.2");
  ScopedEnv speeds("PLUGIN_TEST_CODEC_SPEED_DIR", dir.c_str());
  ScopedEnv nodes("PLUGIN_TEST_RANKS_PER_NODE", "1");
  ScopedEnv network("TERSE_NET_GBPS", "1");
  ScopedEnv hostid("TERSE_HOSTID", nullptr);
  ScopedEnv hierarchy("TERSE_HIERARCHICAL", nullptr);
  ScopedEnv algo("TERSE_COMPRESSED_ALGO", nullptr);
  const std::vector<RankProcessResult> results =
      run(plugin_test::kScenarioAutoAgreement, 2, new_id());
  expect_all_ok(results, 2);
  std::string plans[2];
  for (int rank = 0; rank < 2 && rank < static_cast<int>(results.size()); ++rank) {
    const std::string& output = results[static_cast<size_t>(rank)].output;
    const size_t at = output.find("plan: ");
    ASSERT_NE(at, std::string::npos) << describe(results[static_cast<size_t>(rank)]);
    plans[rank] = output.substr(at, output.find('\n', at) - at);
  }
  EXPECT_EQ(plans[0], plans[1]);
  EXPECT_TRUE(plans[0].rfind("plan: int8", 0) == 0 || plans[0].rfind("plan: int4", 0) == 0)
      << plans[0];
  for (int rank = 0; rank < 2; ++rank) {
    std::remove((dir + "/rank" + std::to_string(rank) + ".txt").c_str());
  }
  rmdir(dir.c_str());
}

INSTANTIATE_TEST_SUITE_P(Codecs, PluginCompressedProcesses,
                         ::testing::Values(CompressedRun{"int8", 2, 0, false},
                                           CompressedRun{"int8", 3, 0, false},
                                           CompressedRun{"topk:ratio=0.05", 4, 0, false},
                                           CompressedRun{"int8", 4, 2, true},
                                           CompressedRun{"topk:ratio=0.05", 4, 2, true},
                                           CompressedRun{"int4", 3, 1, false}),
                         [](const ::testing::TestParamInfo<CompressedRun>& info) {
                           std::string name = info.param.codec;
                           name = name.substr(0, name.find(':'));
                           return name + "_" + std::to_string(info.param.nranks) + "ranks_" +
                                  std::to_string(info.param.ranks_per_node) + "pernode";
                         });
