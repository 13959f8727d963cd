// Which algorithm runs a call. By default the table's rows decide (algorithm_table.h: the first
// row of the collective whose default byte range holds the call's size); TERSE_ALGO overrides:
//
//   TERSE_ALGO=entry[,entry...]   entry = name            every collective with an algorithm
//                                                         of that name uses it
//                                       | collective:name that collective uses it
//   e.g. TERSE_ALGO=ring  or  TERSE_ALGO=allreduce:ring,broadcast:chain
//
// Collectives are named as collective_name() prints them (allreduce, broadcast, reduce,
// allgather, reducescatter, alltoall, gather, scatter, send, recv); names are matched without
// regard to case. A name that matches nothing is refused, with the list of what exists. Every
// rank must set the same TERSE_ALGO (ranks running different algorithms would wait for messages
// that never come): communicator creation compares them and refuses a difference on every rank
// (settings_agreement.h).
#pragma once

#include <nccl.h>

#include <string>

#include "collectives/algorithm_table.h"
#include "collectives/collective_args.h"

namespace terse {

constexpr int kCollectiveKinds = static_cast<int>(CollectiveKind::kRecv) + 1;

class AlgorithmSelection {
 public:
  // Defaults only.
  AlgorithmSelection() = default;

  // Parses a TERSE_ALGO value ("" = defaults only); ncclInvalidArgument naming the bad entry
  // and listing every algorithm otherwise.
  static ncclResult_t parse(const std::string& text, AlgorithmSelection* out);
  // parse(TERSE_ALGO).
  static ncclResult_t from_environment(AlgorithmSelection* out);

  // The algorithm for this call on `nranks` ranks, or null when no algorithm implements its
  // collective.
  const AlgorithmInfo* choose(const CollectiveArgs& args, int nranks) const;

  // The forced algorithm for `kind`, or null when the table's default decides.
  const AlgorithmInfo* forced(CollectiveKind kind) const { return forced_[static_cast<int>(kind)]; }

 private:
  const AlgorithmInfo* forced_[kCollectiveKinds] = {};
};

// Every algorithm as "collective:name", comma-separated (for messages and --help texts).
std::string algorithm_names();

}  // namespace terse
