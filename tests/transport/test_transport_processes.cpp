// Transport between ranks in separate processes: the helper executable transport_rank_process
// runs one rank each (rank_process_protocol.h); this process hosts the bootstrap root.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "rank_process_protocol.h"
#include "transport/unique_id.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::RankProcessResult;
using test::ScopedEnv;

class TransportProcesses : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};

  std::vector<RankProcessResult> run(const char* scenario, int nranks, double seconds_allowed,
                                     int expendable_rank = -1) {
    UniqueId id;
    EXPECT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
    return test::run_rank_processes(scenario, nranks, id, seconds_allowed, expendable_rank);
  }
};

TEST_F(TransportProcesses, ExchangeWithUcxDefaults) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "20");
  for (const RankProcessResult& result : run(test::kScenarioExchange, 3, 60)) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

TEST_F(TransportProcesses, ExchangeOverTcpOnly) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "20");
  ScopedEnv tls("UCX_TLS", "tcp");
  for (const RankProcessResult& result : run(test::kScenarioExchange, 2, 60)) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

TEST_F(TransportProcesses, ExchangeOverSharedMemoryOnly) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "20");
  ScopedEnv tls("UCX_TLS", "shm,self");
  for (const RankProcessResult& result : run(test::kScenarioExchange, 3, 60)) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

// Ranks on different nodes over TCP: terse sends messages up to Transport::kTcpEagerBytes (256 KiB)
// eagerly, as UCX's endpoints must then report; a UCX_RNDV_THRESH of the user's wins.
TEST_F(TransportProcesses, OverTcpMessagesUpTo256KiBGoEagerlyUnlessTheUserSaysOtherwise) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "20");
  ScopedEnv tls("UCX_TLS", "tcp");
  {
    ScopedEnv user("UCX_RNDV_THRESH", nullptr);
    ScopedEnv expected("TERSE_TEST_RENDEZVOUS_BYTES", std::to_string(256 * 1024 + 1).c_str());
    for (const RankProcessResult& result : run(test::kScenarioRendezvousThreshold, 3, 60)) {
      EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
    }
  }
  ScopedEnv user("UCX_RNDV_THRESH", "12345");
  ScopedEnv expected("TERSE_TEST_RENDEZVOUS_BYTES", "12345");
  for (const RankProcessResult& result : run(test::kScenarioRendezvousThreshold, 2, 60)) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

// The last rank exits after the first round. Whatever wire UCX uses, the others must report
// Result::kRemoteError within TERSE_TIMEOUT_S (plus slack), never hang, and abort promptly.
class DeadPeer : public TransportProcesses, public ::testing::WithParamInterface<const char*> {};

TEST_P(DeadPeer, SurvivorsGetRemoteErrorWithinTheTimeout) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "5");
  std::optional<ScopedEnv> tls;
  if (GetParam() != nullptr) tls.emplace("UCX_TLS", GetParam());
  for (const RankProcessResult& result : run(test::kScenarioDeadPeer, 3, 45)) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

// Over shared memory alone UCX cannot report the death (UCP_ERR_HANDLING_MODE_NONE): the
// deadline must.
INSTANTIATE_TEST_SUITE_P(Wires, DeadPeer, ::testing::Values(nullptr, "tcp", "shm,self"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param ? info.param : "default";
                           for (char& c : name) {
                             if (c == ',') c = '_';
                           }
                           return name;
                         });

// Between ranks on one host the default endpoints use shared memory, which reports nothing when
// a peer dies; the transport watches the peer's process instead, so the survivors must see the
// error long before a two-minute deadline (they are killed, and the test fails, after 40 s).
TEST_F(TransportProcesses, DeadPeerOnThisHostIsNoticedLongBeforeTheDeadline) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "120");
  ScopedEnv mode("TERSE_UCX_ERROR_MODE", "auto");
  for (const RankProcessResult& result : run(test::kScenarioDeadPeer, 3, 40)) {
    EXPECT_TRUE(result.exited && result.exit_code == test::kRankOk) << describe(result);
  }
}

// The last rank stops (SIGSTOP) after the first round: its connections stay up, so only the
// deadline can end the others' waits. They must report Result::kRemoteError within TERSE_TIMEOUT_S.
TEST_F(TransportProcesses, HungPeerTurnsIntoRemoteErrorAtTheDeadline) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "3");
  std::vector<RankProcessResult> results = run(test::kScenarioHungPeer, 3, 40, /*expendable=*/2);
  ASSERT_EQ(results.size(), 3u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(results[rank].exited && results[rank].exit_code == test::kRankOk)
        << describe(results[rank]);
    EXPECT_GE(results[rank].seconds, 3.0) << "the error came before the deadline could pass";
  }
  EXPECT_TRUE(results[2].killed_by_parent) << describe(results[2]);
}

}  // namespace
}  // namespace terse
