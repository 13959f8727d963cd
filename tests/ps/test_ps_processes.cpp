// The parameter server (terse.h, tersePs*) with ranks as processes over UCX on loopback:
// ps_rank_process, an application of libterse's public API, runs one scenario per rank and
// checks what it receives against a model it computes itself (rank_process/ps_rank_process.cpp
// says what each checks). 2 to 5 ranks.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ps/ps_rank_launch.h"

namespace {

using terse::test::RankProcessResult;
using terse::test::ScopedEnv;
using terse::test::Settings;

// Every request ends by this deadline (TERSE_TIMEOUT_S), so a hang fails its rank first.
constexpr int kTimeoutSeconds = 20;
constexpr double kSecondsAllowed = 6 * kTimeoutSeconds;

class PsProcesses : public ::testing::Test {
 protected:
  // Runs `scenario` on `nranks` processes with `settings` in their environment.
  static std::vector<RankProcessResult> run(const char* scenario, int nranks,
                                            const Settings& settings, int expendable = -1) {
    return terse::test::run_ps_ranks(TERSE_PS_RANK_PROCESS_PATH, scenario, nranks, settings,
                                     kSecondsAllowed, expendable);
  }

  static void expect_all_ok(const std::vector<RankProcessResult>& results, int nranks) {
    terse::test::expect_all_exited_ok(results, nranks);
  }

  terse::test::PsRankEnvironment environment_{kTimeoutSeconds};
};

class PsRanks : public PsProcesses, public ::testing::WithParamInterface<int> {};

std::string ranks_name(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

// Placement against its model, shards initialised from their owners, concurrent adds from
// every rank equal to the exact sum (fp32 and fp64, split and whole), copy, zero, a client's
// copy-then-add applied in its order, and a bf16 receive equal to the owner's values rounded.
TEST_P(PsRanks, ConcurrentAddsCopyZeroAndOrderFollowTheModel) {
  expect_all_ok(run("sum", GetParam(), {{"TERSE_PS_SPLIT_BYTES", "4K"}}), GetParam());
}

// The same with the bf16 receives stated in the policy (a rule's ps_receive) instead of the call.
TEST_F(PsProcesses, APolicyRuleCompressesReceives) {
  const std::string path = testing::TempDir() + "ps_receive_policy.yaml";
  FILE* file = fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  fputs("rules:\n  - match: {name: bf16_received}\n    codec: none\n    ps_receive: bf16\n", file);
  fclose(file);
  expect_all_ok(
      run("sum", 3,
          {{"TERSE_PS_SPLIT_BYTES", "4K"}, {"TERSE_POLICY", path}, {"PS_RECEIVE_BY_POLICY", "1"}}),
      3);
}

// Every rank copies uniform tensors (whole and split, rendezvous-sized) while receiving them:
// every shard it reads holds one copy's values, never parts of two.
TEST_P(PsRanks, AReceiveNeverSeesAHalfAppliedSend) {
  expect_all_ok(run("torn", GetParam(), {}), GetParam());
}

// Bounded staleness: after each clock wait, every rank's completed steps (counted on the server)
// lie within the bound, for staleness 0 (lockstep) and 2, with one rank straggling.
TEST_P(PsRanks, StepClocksNeverExceedTheStalenessBound) {
  expect_all_ok(run("clock", GetParam(), {{"PS_STALENESS", "0"}, {"TERSE_PS_SPLIT_BYTES", "8"}}),
                GetParam());
  expect_all_ok(run("clock", GetParam(), {{"PS_STALENESS", "2"}}), GetParam());
}

// Compressed adds with error feedback over 30 steps: the owners hold exactly what a replay of
// every client's encodes says, and owners plus residuals hold the pushed sum. A sparsifier
// named per tensor, and int8 chosen by the policy (TERSE_CODEC) by the tensor's name.
TEST_P(PsRanks, CompressedAddsWithErrorFeedbackConserveThePushedSum) {
  expect_all_ok(
      run("compressed", GetParam(),
          {{"PS_PUSH_CODEC", "topk:ratio=0.1,method=exact"}, {"TERSE_PS_SPLIT_BYTES", "1K"}}),
      GetParam());
  expect_all_ok(
      run("compressed", GetParam(), {{"TERSE_CODEC", "int8"}, {"PS_MODEL_CODEC", "int8"}}),
      GetParam());
}

// Bad arguments are refused with a sentence naming them; ranks that disagree fail alike.
TEST_P(PsRanks, BadInputIsRefusedNamingTheArgument) {
  expect_all_ok(run("bad_input", GetParam(), {}), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ranks, PsRanks, ::testing::Values(2, 3, 5), ranks_name);

// The last rank kills itself after init: every other rank's clock wait, receive and add fail
// with ncclRemoteError within TERSE_TIMEOUT_S, none hangs.
TEST_F(PsProcesses, ADeadOwnerFailsEveryClientWithinTheTimeout) {
  for (int nranks : {2, 4}) {
    const std::vector<RankProcessResult> results =
        run("owner_killed", nranks, {{"TERSE_PS_SPLIT_BYTES", "1K"}});
    ASSERT_EQ(results.size(), size_t(nranks));
    for (const RankProcessResult& result : results) {
      if (result.rank == nranks - 1) {
        EXPECT_TRUE(!result.exited && result.signal == 9 && !result.killed_by_parent)
            << describe(result);
      } else {
        EXPECT_TRUE(result.exited && result.exit_code == 0) << describe(result);
      }
    }
  }
}

// The last rank stops (SIGSTOP) after init: alive to the transport but silent, so every other
// rank's clock wait, receive and add fail with ncclRemoteError at TERSE_TIMEOUT_S (the deadline
// path), none hangs. The stopped rank is killed once the others exit.
TEST_F(PsProcesses, ASilentOwnerFailsEveryClientAtTheTimeout) {
  ScopedEnv timeout{"TERSE_TIMEOUT_S", "2"};
  constexpr int nranks = 3;
  const std::vector<RankProcessResult> results = run(
      "owner_killed", nranks, {{"TERSE_PS_SPLIT_BYTES", "1K"}, {"PS_OWNER_STOP", "1"}}, nranks - 1);
  ASSERT_EQ(results.size(), size_t(nranks));
  for (const RankProcessResult& result : results) {
    if (result.rank == nranks - 1) {
      EXPECT_TRUE(result.killed_by_parent) << describe(result);
    } else {
      EXPECT_TRUE(result.exited && result.exit_code == 0) << describe(result);
    }
  }
}

// After a warm-up cycle, three init/use/free cycles of a 32 MiB tensor with int8 pushes: RSS
// returns to where it was after each free, and the server thread ends with the last tensor.
TEST_F(PsProcesses, FreeReleasesTheMemory) {
  expect_all_ok(run("rss", 2, {}), 2);
}

}  // namespace
