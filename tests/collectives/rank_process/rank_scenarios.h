// The scenarios collective_rank_process runs besides "dead-peer": the checks of the thread
// tests, made inside each rank process (collective_rank_process <scenario> <rank> <nranks>
// <unique id in hex>; rank_process_protocol.h). Each runs one rank on `comm`, says on stderr
// what went wrong, and returns a RankExitCode: kRankOk, or kRankExchangeFailed for a call that
// failed or a wrong result.
#pragma once

#include <string>

#include "collectives/communicator.h"

namespace terse {
namespace test {

// Every collective, algorithm, type, op and placement of collective_case_lists.h (the thread
// tests' lists) against the float64 reference, plus one 16 MiB allreduce.
constexpr const char* kScenarioAllCollectives = "all-collectives";
// Several collectives and a send/recv ring in one group; a two-way ring in another.
constexpr const char* kScenarioGroups = "groups";
// ncclCommSplit by parity with reversed keys and one rank left out, a split of a split, and
// the parent working alongside its children.
constexpr const char* kScenarioSplit = "split";

int run_all_collectives(Communicator& comm);
int run_groups(Communicator& comm);
int run_split(Communicator& comm);

// Writes "collective_rank_process rank <rank>: <what>" to stderr and returns `code`.
int report(int code, int rank, const std::string& what);

}  // namespace test
}  // namespace terse
