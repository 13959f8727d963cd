// Collectives between ranks in separate processes (collective_rank_process, spawned fresh per
// rank so UCX starts clean in each): a rank killed mid-job turns into ncclRemoteError on every
// other rank within TERSE_TIMEOUT_S, the error stays (ncclCommGetAsyncError, later calls fail at
// once) and abort returns promptly. The checks run inside the survivors and come back as exit
// codes (rank_process_protocol.h).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "communicator_test_support.h"
#include "rank_process_protocol.h"
#include "transport/unique_id.h"

namespace terse {
namespace {

using test::RankProcessResult;

// auto (default): shared memory between these ranks, the transport watches their processes.
// peer: UCX reports the dead peer. none: the same endpoints as auto here.
class CollectiveDeadPeer : public ::testing::TestWithParam<const char*> {};

TEST_P(CollectiveDeadPeer, SurvivorsGetRemoteErrorWithinTheTimeout) {
  test::EnvironmentSettings loopback(test::loopback_settings());
  test::EnvironmentSettings settings(
      {{std::string("TERSE_TIMEOUT_S"), "4"}, {std::string("TERSE_UCX_ERROR_MODE"), GetParam()}});
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), ncclSuccess) << last_error();
  const int nranks = 3;
  std::vector<RankProcessResult> results =
      test::run_rank_processes("dead-peer", nranks, id, /*seconds_allowed=*/40);
  ASSERT_EQ(results.size(), static_cast<size_t>(nranks));
  for (int rank = 0; rank < nranks - 1; ++rank) {
    EXPECT_TRUE(results[rank].exited && results[rank].exit_code == test::kRankOk)
        << describe(results[rank]);
  }
  EXPECT_FALSE(results[nranks - 1].exited) << "the victim was meant to die by SIGKILL";
}

INSTANTIATE_TEST_SUITE_P(ErrorModes, CollectiveDeadPeer, ::testing::Values("auto", "peer", "none"));

}  // namespace
}  // namespace terse
