#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/result.h"
#include "transport/bootstrap_client.h"
#include "transport/bootstrap_messages.h"
#include "transport/deadline.h"
#include "transport/socket.h"
#include "transport/unique_id.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using Clock = std::chrono::steady_clock;
using test::run_ranks;
using test::ScopedEnv;
using Table = std::vector<std::vector<uint8_t>>;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A wait whose deadline is a second that takes this long has hung: a guard, not a measure (a
// loaded machine may take several times the deadline).
constexpr double kHangSeconds = 30;

// Distinct, rank-specific payloads of varied sizes (empty included).
std::vector<uint8_t> payload_of(int rank) {
  std::vector<uint8_t> payload((rank * 37) % 300);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(rank * 11 + i);
  return payload;
}

Table expected_table(int nranks) {
  Table table;
  for (int rank = 0; rank < nranks; ++rank) table.push_back(payload_of(rank));
  return table;
}

// Every rendezvous here runs on loopback with a short TERSE_TIMEOUT_S.
class Bootstrap : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "10"};
  const double timeout_seconds_ = 10;

  // Runs bootstrap_allgather for each (rank, nranks) pair on its own thread.
  std::vector<Result> run(const UniqueId& id, const std::vector<std::pair<int, int>>& ranks,
                          std::vector<Table>* tables, std::vector<std::string>* errors) {
    std::vector<Result> results(ranks.size(), Result::kInternalError);
    tables->assign(ranks.size(), {});
    errors->assign(ranks.size(), "");
    run_ranks(static_cast<int>(ranks.size()), [&](int i) {
      results[i] = bootstrap_allgather(id, ranks[i].first, ranks[i].second,
                                       payload_of(ranks[i].first), timeout_seconds_, &(*tables)[i]);
      (*errors)[i] = last_error();
    });
    return results;
  }
};

class BootstrapRanks : public Bootstrap, public ::testing::WithParamInterface<int> {};

TEST_P(BootstrapRanks, EveryRankGetsTheSameTable) {
  const int nranks = GetParam();
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  std::vector<std::pair<int, int>> ranks;
  for (int rank = 0; rank < nranks; ++rank) ranks.push_back({rank, nranks});
  std::vector<Table> tables;
  std::vector<std::string> errors;
  std::vector<Result> results = run(id, ranks, &tables, &errors);
  for (int rank = 0; rank < nranks; ++rank) {
    EXPECT_EQ(results[rank], Result::kSuccess) << errors[rank];
    EXPECT_EQ(tables[rank], expected_table(nranks)) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, ::testing::Values(1, 2, 3, 4, 8));

// How many lines of the file at `path` contain `text`.
size_t count_lines_with(const std::string& path, const std::string& text) {
  std::ifstream file(path);
  std::string line;
  size_t count = 0;
  while (std::getline(file, line)) count += line.find(text) != std::string::npos;
  return count;
}

TEST_F(Bootstrap, CommIdLetsRankZeroStartTheRootWhateverTheArrivalOrder) {
  for (const char* host : {"127.0.0.1", "::1"}) {
    // Held until the ranks are done: nobody else takes it, and until rank 0's root listens on it
    // every connection to it is refused (transport_test_support.h).
    test::ReservedPort reserved(host);
    if (reserved.port() == 0) continue;  // no IPv6 loopback here
    const std::string port = std::to_string(reserved.port());
    std::string value = std::string(strchr(host, ':') ? "[" : "") + host +
                        (strchr(host, ':') ? "]" : "") + ":" + port;
    ScopedEnv comm_id("TERSE_COMM_ID", value.c_str());
    const int nranks = 4;
    std::vector<Result> results(nranks, Result::kInternalError);
    std::vector<Table> tables(nranks);
    std::vector<std::string> errors(nranks);
    // The others must have been refused before rank 0 starts the root, and then retry: their
    // first refusal is an INFO line each ("connect to <address> failed ...; retrying"), which
    // rank 0 waits for in the log (the deadline only turns a hang into a failure).
    char log_path[] = "/tmp/terse_comm_id_log_XXXXXX";
    close(mkstemp(log_path));
    {
      ScopedEnv debug("TERSE_DEBUG", "INFO");
      ScopedEnv debug_file("TERSE_DEBUG_FILE", log_path);
      reload_log_settings();
      const std::string refused = "connect to " + value + " failed";
      run_ranks(nranks, [&](int rank) {
        if (rank == 0) {
          const Deadline deadline = Deadline::after_seconds(timeout_seconds_);
          while (count_lines_with(log_path, refused) < static_cast<size_t>(nranks - 1) &&
                 !deadline.expired()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          EXPECT_GE(count_lines_with(log_path, refused), static_cast<size_t>(nranks - 1))
              << "the other ranks were not all refused before rank 0 started";
        }
        UniqueId id;  // every rank makes its own: the same id, never broadcast
        results[rank] = create_unique_id(&id);
        if (results[rank] == Result::kSuccess) {
          results[rank] = bootstrap_allgather(id, rank, nranks, payload_of(rank), timeout_seconds_,
                                              &tables[rank]);
        }
        errors[rank] = last_error();
      });
    }
    reload_log_settings();  // back to the test's own settings
    unlink(log_path);
    for (int rank = 0; rank < nranks; ++rank) {
      EXPECT_EQ(results[rank], Result::kSuccess) << value << ": " << errors[rank];
      EXPECT_EQ(tables[rank], expected_table(nranks)) << value;
    }
  }
}

TEST_F(Bootstrap, CommIdThatIsNotLocalFailsOnRankZero) {
  ScopedEnv comm_id("TERSE_COMM_ID", "192.0.2.250:29500");  // TEST-NET-1: never this host
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess);
  Table table;
  EXPECT_EQ(bootstrap_allgather(id, 0, 2, payload_of(0), timeout_seconds_, &table),
            Result::kSystemError);
  EXPECT_NE(std::string(last_error()).find("192.0.2.250:29500"), std::string::npos);
}

TEST_F(Bootstrap, DuplicateRankFailsEveryRankWithoutWaiting) {
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  std::vector<Table> tables;
  std::vector<std::string> errors;
  Clock::time_point start = Clock::now();
  std::vector<Result> results = run(id, {{0, 3}, {1, 3}, {1, 3}}, &tables, &errors);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i], Result::kInvalidUsage) << errors[i];
    EXPECT_NE(errors[i].find("passed rank 1"), std::string::npos) << errors[i];
  }
  EXPECT_LT(seconds_since(start), timeout_seconds_ / 2);
}

TEST_F(Bootstrap, NranksMismatchFailsEveryRankWithoutWaiting) {
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  std::vector<Table> tables;
  std::vector<std::string> errors;
  Clock::time_point start = Clock::now();
  std::vector<Result> results = run(id, {{0, 3}, {1, 4}}, &tables, &errors);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i], Result::kInvalidUsage) << errors[i];
    EXPECT_NE(errors[i].find("disagree"), std::string::npos) << errors[i];
  }
  EXPECT_LT(seconds_since(start), timeout_seconds_ / 2);
}

TEST_F(Bootstrap, RankOutOfRangeIsRefusedBeforeConnecting) {
  UniqueId id;
  encode_unique_id(UniqueIdFields{}, &id);  // never contacted
  Table table;
  EXPECT_EQ(bootstrap_allgather(id, 3, 3, {}, 1, &table), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("rank 3"), std::string::npos);
  EXPECT_EQ(bootstrap_allgather(id, -1, 3, {}, 1, &table), Result::kInvalidArgument);
  EXPECT_EQ(bootstrap_allgather(id, 0, 0, {}, 1, &table), Result::kInvalidArgument);
  EXPECT_EQ(
      bootstrap_allgather(id, 0, 1, std::vector<uint8_t>(kMaxBootstrapPayloadBytes + 1), 1, &table),
      Result::kInvalidArgument);
}

TEST_F(Bootstrap, MissingRankIsNamedWhenTheTimeoutPasses) {
  ScopedEnv timeout("TERSE_TIMEOUT_S", "1");
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  std::vector<Result> results(2, Result::kInternalError);
  std::vector<std::string> errors(2);
  Clock::time_point start = Clock::now();
  run_ranks(2, [&](int i) {
    Table table;
    int rank = i == 0 ? 0 : 2;  // rank 1 never comes
    results[i] = bootstrap_allgather(id, rank, 3, payload_of(rank), 1, &table);
    errors[i] = last_error();
  });
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i], Result::kRemoteError) << errors[i];
    EXPECT_NE(errors[i].find("missing ranks: 1"), std::string::npos) << errors[i];
  }
  EXPECT_LT(seconds_since(start), kHangSeconds);
}

TEST_F(Bootstrap, UnreachableRootTimesOut) {
  // Bound here and never listening: every connection to it is refused (a port found free and
  // released could be someone's listener by the time the rank connects).
  test::ReservedPort reserved("127.0.0.1");
  ASSERT_NE(reserved.port(), 0);
  UniqueIdFields fields;
  ASSERT_EQ(
      SocketAddress::parse("127.0.0.1:" + std::to_string(reserved.port()), "TEST", &fields.root),
      Result::kSuccess);
  UniqueId id;
  encode_unique_id(fields, &id);
  Table table;
  Clock::time_point start = Clock::now();
  EXPECT_EQ(bootstrap_allgather(id, 0, 2, payload_of(0), 1, &table), Result::kRemoteError);
  EXPECT_NE(std::string(last_error()).find("could not connect"), std::string::npos);
  EXPECT_LT(seconds_since(start), kHangSeconds);
}

}  // namespace
}  // namespace terse
