// One rank of a multi-process collectives test (the launcher and exit codes are the transport
// tests', rank_process_protocol.h). Reports through its exit code; says what went wrong on
// stderr. The scenarios besides "dead-peer" are in rank_scenarios.h.
//
// Scenario "dead-peer": every rank runs rounds of collectives (allgather, broadcast,
// reduce-scatter); the last rank kills itself (SIGKILL) after the first round, as a crashed
// process would. The others must get ncclRemoteError from the collective they are in within
// TERSE_TIMEOUT_S, see it again from ncclCommGetAsyncError and, at once, from the next call, and
// abort promptly.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "common/result.h"
#include "rank_process_protocol.h"
#include "rank_scenarios.h"

namespace terse {
namespace test {

int report(int code, int rank, const std::string& what) {
  fprintf(stderr, "collective_rank_process rank %d: %s\n", rank, what.c_str());
  return code;
}

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kScenarioCollectiveDeadPeer = "dead-peer";

constexpr double kAbortHangSeconds = 15;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One round: three collectives of 64K floats each.
ncclResult_t run_round(Communicator& comm, std::vector<float>* data, std::vector<float>* out) {
  const size_t count = data->size() / comm.nranks();
  CollectiveArgs args;
  args.type = ncclFloat32;
  args.kind = CollectiveKind::kAllGather;
  args.send = data->data();
  args.recv = out->data();
  args.count = count;
  TERSE_CHECK(comm.run(args));
  args.kind = CollectiveKind::kBroadcast;
  args.count = data->size();
  args.send = data->data();
  args.recv = data->data();
  args.root = 0;
  TERSE_CHECK(comm.run(args));
  args.kind = CollectiveKind::kReduceScatter;
  args.send = data->data();
  args.recv = out->data();
  args.count = count;
  return comm.run(args);
}

int run_dead_peer(std::unique_ptr<Communicator> comm, double timeout) {
  const int rank = comm->rank();
  const int victim = comm->nranks() - 1;
  std::vector<float> data(static_cast<size_t>(comm->nranks()) * 16384, 1.0f), out(data.size());
  ncclResult_t result = run_round(*comm, &data, &out);
  if (result != ncclSuccess) return report(kRankExchangeFailed, rank, last_error());
  if (rank == victim) raise(SIGKILL);

  const double slack = 5.0;
  for (int round = 1; result == ncclSuccess && round < 1000; ++round) {
    Clock::time_point started = Clock::now();
    result = run_round(*comm, &data, &out);
    if (result != ncclSuccess && seconds_since(started) > timeout + slack) {
      return report(kRankErrorTooLate, rank,
                    "the error came after " + std::to_string(seconds_since(started)) + " s");
    }
  }
  if (result == ncclSuccess) {
    return report(kRankNoErrorFromDeadPeer, rank, "every round succeeded without the victim");
  }
  if (result != ncclRemoteError) {
    return report(kRankWrongErrorFromDeadPeer, rank,
                  std::string(result_string(result)) + ": " + last_error());
  }
  fprintf(stderr, "collective_rank_process rank %d: as expected: %s\n", rank, last_error());
  if (comm->async_error() != ncclRemoteError) {
    return report(kRankWrongErrorFromDeadPeer, rank, "ncclCommGetAsyncError did not report it");
  }
  // A broken communicator refuses further calls at once, with the same error: it says so
  // (a call that tried the dead peer again would fail only at its deadline, saying why).
  result = run_round(*comm, &data, &out);
  if (result != ncclRemoteError ||
      std::string(last_error()).find("failed earlier") == std::string::npos) {
    return report(kRankWrongErrorFromDeadPeer, rank,
                  "the call after the failure was not refused as failed earlier with "
                  "ncclRemoteError: " +
                      std::string(last_error()));
  }
  // abort() bounds its own wait; one that takes kAbortHangSeconds has hung (a guard, not a
  // measure: a loaded machine may take several times as long).
  Clock::time_point abort_started = Clock::now();
  comm->abort();
  comm.reset();
  if (seconds_since(abort_started) > kAbortHangSeconds) {
    return report(kRankAbortTooSlow, rank,
                  "abort took " + std::to_string(seconds_since(abort_started)) + " s");
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

  std::unique_ptr<Communicator> comm;
  if (Communicator::create(id, rank, nranks, -1, &comm) != ncclSuccess) {
    return report(kRankCreateFailed, rank, last_error());
  }
  if (scenario == kScenarioCollectiveDeadPeer)
    return run_dead_peer(std::move(comm), arguments.timeout_seconds);
  if (scenario == kScenarioAllCollectives) return run_all_collectives(*comm);
  if (scenario == kScenarioGroups) return run_groups(*comm);
  if (scenario == kScenarioSplit) return run_split(*comm);
  return report(kRankBadArguments, rank, "unknown scenario " + scenario);
}

}  // namespace
}  // namespace test
}  // namespace terse

int main(int argc, char** argv) {
  return terse::test::run(argc, argv);
}
