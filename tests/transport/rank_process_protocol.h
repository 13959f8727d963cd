// How the multi-process tests talk to their helper executable (transport_rank_process): the
// command line that starts one rank, and the exit codes it reports with. Each rank runs in a
// fresh process (spawned, not forked), so UCX starts clean in every one.
#pragma once

#include <string>
#include <vector>

#include "rank_processes.h"
#include "transport/unique_id.h"

namespace terse {
namespace test {

// transport_rank_process <scenario> <rank> <nranks> <unique id in hex>
constexpr const char* kScenarioExchange = "exchange";
// The last rank exits after the first round; the others must then get Result::kRemoteError within
// TERSE_TIMEOUT_S (+ slack) and abort() must return promptly.
constexpr const char* kScenarioDeadPeer = "dead-peer";
// The same, but the last rank stops itself (SIGSTOP) instead of exiting: nothing tells UCX it is
// gone, so only the TERSE_TIMEOUT_S deadline can end the others' waits.
constexpr const char* kScenarioHungPeer = "hung-peer";
// Every rank is a node of its own (TERSE_HOSTID=node<rank>, set by the rank process before it
// creates its transport) and reports the rendezvous size UCX chose for its endpoints to the other
// nodes (Transport::network_rendezvous_threshold); it must equal TERSE_TEST_RENDEZVOUS_BYTES.
constexpr const char* kScenarioRendezvousThreshold = "rendezvous-threshold";

enum RankExitCode {
  kRankOk = 0,
  kRankBadArguments = 10,
  kRankCreateFailed = 11,
  kRankExchangeFailed = 12,  // an error where success was expected, or wrong data
  kRankNoErrorFromDeadPeer = 13,
  kRankWrongErrorFromDeadPeer = 14,
  kRankErrorTooLate = 15,
  kRankAbortTooSlow = 16,
  kRankWrongRendezvousThreshold = 17,
};

// A rank process's command line: <scenario> <rank> <nranks> <unique id in hex>.
struct RankProcessArguments {
  std::string scenario;
  int rank = 0;
  int nranks = 0;
  UniqueId id;
  double timeout_seconds = 0;  // TERSE_TIMEOUT_S
};
// Parses it (printing the usage on stderr when it is malformed) and prepares the process: an
// alarm at 3 x TERSE_TIMEOUT_S + 20 s, so that it never outlives a broken test, and its rank in
// log lines. False: exit with kRankBadArguments.
bool start_rank_process(int argc, char** argv, RankProcessArguments* arguments);

std::string unique_id_to_hex(const UniqueId& id);
bool unique_id_from_hex(const std::string& hex, UniqueId* id);

// Spawns `nranks` helper processes for `scenario` (environment inherited) and waits for all of
// them (rank_processes.h: any still running after `seconds_allowed` is killed, `expendable_rank`
// (if >= 0) as soon as every other rank has exited, and each one's output is kept for
// describe()).
std::vector<RankProcessResult> run_rank_processes(const char* scenario, int nranks,
                                                  const UniqueId& id, double seconds_allowed,
                                                  int expendable_rank = -1);

}  // namespace test
}  // namespace terse
