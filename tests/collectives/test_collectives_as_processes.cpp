// The ranks-as-processes twin of test_collectives_threads.cpp, test_group.cpp and
// test_split.cpp: each rank is a collective_rank_process of its own (spawned fresh, so UCX
// starts clean in each), on IPv4 loopback with TERSE_UCX_ERROR_MODE at its default, and checks
// its own results against the float64 reference inside (rank_process/rank_scenarios.h); a wrong
// element or failed call comes back as the rank's exit code, with what the rank printed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "communicator_test_support.h"
#include "rank_process/rank_scenarios.h"
#include "rank_process_protocol.h"
#include "transport/unique_id.h"

namespace terse {
namespace {

using test::RankProcessResult;

// A hang ends at this deadline in every rank (then the test's own deadline kills what is left).
constexpr const char* kTimeoutSeconds = "20";
constexpr double kSecondsAllowed = 150;

void expect_every_rank_ok(const char* scenario, int nranks) {
  test::EnvironmentSettings loopback(test::loopback_settings());
  test::EnvironmentSettings settings({{std::string("TERSE_TIMEOUT_S"), kTimeoutSeconds},
                                      {std::string("TERSE_UCX_ERROR_MODE"), nullptr}});
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), ncclSuccess) << last_error();
  const std::vector<RankProcessResult> results =
      test::run_rank_processes(scenario, nranks, id, kSecondsAllowed);
  ASSERT_EQ(results.size(), static_cast<size_t>(nranks));
  for (const RankProcessResult& result : results) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

class CollectiveProcesses : public ::testing::TestWithParam<int> {};

// Every collective, algorithm, type, op and placement at 0, 1, 7 and 1001 elements, a few MiB
// per collective, and (up to 4 ranks) a 16 MiB allreduce.
TEST_P(CollectiveProcesses, EveryCollectiveTypeOpAndSize) {
  expect_every_rank_ok(test::kScenarioAllCollectives, GetParam());
}

TEST_P(CollectiveProcesses, CollectivesAndSendRecvRingsInGroups) {
  expect_every_rank_ok(test::kScenarioGroups, GetParam());
}

TEST_P(CollectiveProcesses, SplitByParityAndSplitAgain) {
  expect_every_rank_ok(test::kScenarioSplit, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveProcesses, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
}  // namespace terse
