// One rank of a multi-process transport test (see rank_process_protocol.h). Reports through its
// exit code; says what went wrong on stderr.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "exchange_patterns.h"
#include "rank_process_protocol.h"
#include "transport/transport.h"

namespace terse {
namespace test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kAbortHangSeconds = 15;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int report(int code, int rank, const std::string& what) {
  fprintf(stderr, "transport_rank_process rank %d: %s\n", rank, what.c_str());
  return code;
}

int run_exchange(Transport& transport) {
  std::string problem;
  Result result = ring_exchange(transport, 1 << 20, 3, 1, &problem);
  if (result == Result::kSuccess) result = all_to_all_exchange(transport, 2, &problem);
  if (result == Result::kSuccess) result = all_to_all_exchange(transport, 3, &problem);
  if (result == Result::kSuccess) result = control_collectives(transport, &problem);
  if (result != Result::kSuccess) {
    return report(kRankExchangeFailed, transport.rank(),
                  problem.empty() ? std::string(last_error()) : problem);
  }
  return kRankOk;
}

// The last rank leaves without a word after the first round, as a crashed process would; the
// others must see Result::kRemoteError within TERSE_TIMEOUT_S and then abort promptly.
// With `hang`, the last rank stops itself instead: a peer that is alive to the kernel and to
// UCX's connections but never answers, which only the deadline can catch.
int run_dead_peer(std::unique_ptr<Transport> transport, bool hang) {
  const int rank = transport->rank();
  const int victim = transport->nranks() - 1;
  std::string problem;
  Result result = all_to_all_exchange(*transport, 1, &problem);
  if (rank == victim) {
    if (result != Result::kSuccess) return report(kRankExchangeFailed, rank, last_error());
    if (hang) raise(SIGSTOP);  // the test kills it once the others are done
    _exit(kRankOk);  // no destructors, no endpoint close: the kernel cleans up as after a crash
  }
  const double slack = 5.0;
  for (uint32_t round = 2; result == Result::kSuccess && round < 1000; ++round) {
    Clock::time_point started = Clock::now();
    result = all_to_all_exchange(*transport, round, &problem);
    if (result != Result::kSuccess &&
        seconds_since(started) > transport->timeout_seconds() + slack) {
      return report(kRankErrorTooLate, rank,
                    "the error came after " + std::to_string(seconds_since(started)) + " s");
    }
  }
  if (result == Result::kSuccess) {
    return report(kRankNoErrorFromDeadPeer, rank,
                  "every round succeeded without rank " + std::to_string(victim));
  }
  if (result != Result::kRemoteError) {
    return report(kRankWrongErrorFromDeadPeer, rank,
                  std::string(result_string(result)) + ": " + last_error());
  }
  fprintf(stderr, "transport_rank_process rank %d: as expected: %s\n", rank, last_error());
  // abort() bounds its own wait by a second; one that takes kAbortHangSeconds has hung (a guard,
  // not a measure: a loaded machine may take several times as long).
  Clock::time_point abort_started = Clock::now();
  transport->abort();
  transport.reset();
  if (seconds_since(abort_started) > kAbortHangSeconds) {
    return report(kRankAbortTooSlow, rank,
                  "abort took " + std::to_string(seconds_since(abort_started)) + " s");
  }
  return kRankOk;
}

int check_rendezvous_threshold(Transport& transport) {
  const char* expected = getenv("TERSE_TEST_RENDEZVOUS_BYTES");
  if (expected == nullptr) {
    return report(kRankBadArguments, transport.rank(), "TERSE_TEST_RENDEZVOUS_BYTES is not set");
  }
  const std::optional<size_t> threshold = transport.network_rendezvous_threshold();
  if (!threshold || std::to_string(*threshold) != expected) {
    return report(kRankWrongRendezvousThreshold, transport.rank(),
                  "rendezvous from " + (threshold ? std::to_string(*threshold) : "(unknown)") +
                      " bytes, expected " + expected);
  }
  // Every rank checks before any leaves (a leaving rank's endpoints would close under the others).
  if (transport.barrier() != Result::kSuccess) {
    return report(kRankExchangeFailed, transport.rank(), last_error());
  }
  return kRankOk;
}

int run(int argc, char** argv) {
  RankProcessArguments arguments;
  if (!start_rank_process(argc, argv, &arguments)) return kRankBadArguments;
  const std::string& scenario = arguments.scenario;
  const int rank = arguments.rank;
  const int nranks = arguments.nranks;
  const UniqueId& id = arguments.id;

  if (scenario == kScenarioRendezvousThreshold) {
    setenv("TERSE_HOSTID", ("node" + std::to_string(rank)).c_str(), 1);
  }
  std::unique_ptr<Transport> transport;
  if (Transport::create(id, rank, nranks, &transport) != Result::kSuccess) {
    return report(kRankCreateFailed, rank, last_error());
  }
  if (scenario == kScenarioExchange) return run_exchange(*transport);
  if (scenario == kScenarioDeadPeer) return run_dead_peer(std::move(transport), false);
  if (scenario == kScenarioHungPeer) return run_dead_peer(std::move(transport), true);
  if (scenario == kScenarioRendezvousThreshold) return check_rendezvous_threshold(*transport);
  return report(kRankBadArguments, rank, "unknown scenario " + scenario);
}

}  // namespace
}  // namespace test
}  // namespace terse

int main(int argc, char** argv) {
  return terse::test::run(argc, argv);
}
