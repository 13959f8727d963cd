// The update schemes (perf/train/ps_schemes) over real ranks: processes over UCX on loopback, the
// real parameter server of libterse behind them. ps_scheme_rank_process runs one scheme per rank
// and checks every value against what the scheme's contract allows (its header says what each
// scenario checks); a rank reports through its exit code.
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

#include "ps/ps_rank_launch.h"

namespace {

using terse::test::Settings;

// Every request ends by this deadline (TERSE_TIMEOUT_S), so a hang fails its rank first.
constexpr int kTimeoutSeconds = 20;
constexpr double kSecondsAllowed = 6 * kTimeoutSeconds;

class SchemesOverRanks : public ::testing::TestWithParam<int> {
 protected:
  static void run_and_expect_ok(const char* scenario, Settings settings) {
    settings.insert(settings.begin(), {"TERSE_PS_SPLIT_BYTES", "4K"});
    terse::test::expect_all_exited_ok(
        terse::test::run_ps_ranks(TERSE_PS_SCHEME_RANK_PROCESS_PATH, scenario, GetParam(), settings,
                                  kSecondsAllowed),
        GetParam());
  }

  terse::test::PsRankEnvironment environment_{kTimeoutSeconds};
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
