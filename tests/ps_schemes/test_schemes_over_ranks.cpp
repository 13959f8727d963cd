// The update schemes (ps/schemes) over real ranks: processes over UCX on loopback, the real
// parameter server of libterse behind them. ps_scheme_rank_process runs one scheme per rank and
// checks every value against what the scheme's contract allows (its header says what each
// scenario checks); a rank reports through its exit code.
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

#include "launch/hex_bytes.h"
#include "rank_processes.h"
#include "transport_test_support.h"

namespace {

using terse::test::CommandLine;
using terse::test::RankProcessResult;
using terse::test::ScopedEnv;
using Settings = std::vector<std::pair<std::string, std::string>>;

// Every request ends by this deadline (TERSE_TIMEOUT_S), so a hang fails its rank first.
constexpr int kTimeoutSeconds = 20;
constexpr double kSecondsAllowed = 6 * kTimeoutSeconds;

class SchemesOverRanks : public ::testing::TestWithParam<int> {
 protected:
  static void run_and_expect_ok(const char* scenario, const Settings& settings) {
    const int nranks = GetParam();
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
    const std::string hex = terse_test::bytes_to_hex(id.internal, sizeof(id.internal));
    std::vector<CommandLine> ranks;
    for (int rank = 0; rank < nranks; ++rank) {
      CommandLine line = {"/usr/bin/env", "TERSE_PS_SPLIT_BYTES=4K"};
      for (const auto& [name, value] : settings) line.push_back(name + "=" + value);
      line.insert(line.end(), {TERSE_PS_SCHEME_RANK_PROCESS_PATH, scenario, std::to_string(rank),
                               std::to_string(nranks), hex});
      ranks.push_back(line);
    }
    const std::vector<RankProcessResult> results =
        terse::test::run_processes(ranks, kSecondsAllowed);
    ASSERT_EQ(results.size(), size_t(nranks));
    for (const RankProcessResult& result : results) {
      EXPECT_TRUE(result.exited && result.exit_code == 0) << describe(result);
    }
  }

  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv codec_{"TERSE_CODEC", nullptr};
  ScopedEnv policy_{"TERSE_POLICY", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", std::to_string(kTimeoutSeconds).c_str()};
};

std::string ranks_name(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

// A worker holds all of its own steps after every step, a prefix of every other rank's pushes,
// and the centre all of every rank's steps once they flushed.
TEST_P(SchemesOverRanks, DownpourNeverLosesOrDoublesAnUpdate) {
  run_and_expect_ok("downpour", {});
}

// Ranks taking turns: workers and centre equal the elastic update replayed exactly.
TEST_P(SchemesOverRanks, EasgdMatchesTheElasticUpdateExactly) {
  run_and_expect_ok("easgd", {});
}

// Staleness 0: after every step every rank holds every rank's steps so far (and at most one
// more of a rank that already went on).
TEST_P(SchemesOverRanks, StalenessZeroIsSynchronous) {
  run_and_expect_ok("ssp", {{"PS_STALENESS", "0"}});
}

// Staleness 2: no rank's values ever miss another's step older than 2, nor hold one more than
// the bound lets it be ahead.
TEST_P(SchemesOverRanks, StalenessTwoIsNeverExceeded) {
  run_and_expect_ok("ssp", {{"PS_STALENESS", "2"}});
}

INSTANTIATE_TEST_SUITE_P(Ranks, SchemesOverRanks, ::testing::Values(2, 4), ranks_name);

}  // namespace
