// A rank's side of the bootstrap rendezvous: connect to the root named by the unique id, answer
// its challenge with an authenticated hello (this rank's number and its payload), and receive
// every rank's payload in a reply the root authenticates too (bootstrap_messages.h).
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "transport/unique_id.h"

namespace terse {

// Fills `table` with every rank's payload in rank order (this rank's own among them). When the id
// comes from NCCL_COMM_ID, rank 0 first starts the root at that address and keeps it until every
// rank has its answer. Connecting is retried until `timeout_seconds` from now (the root or rank 0
// may start later); the reply is awaited 5 s longer so that the root's verdict (missing ranks,
// inconsistent ranks) arrives ahead of a bare timeout. A connection the root closes before it
// answers (it was pushed out by a flood of strangers, bootstrap_rendezvous.h) is made again.
//
// Errors: Result::kInvalidArgument for rank/nranks/payload out of range or a malformed id;
// Result::kInvalidUsage when the ranks are inconsistent (duplicate rank, nranks mismatch);
// Result::kRemoteError when the root cannot be reached, its reply does not authenticate (the key
// differs: TERSE_COMM_SECRET, or another job's root at that address), or not every rank arrives
// in time.
Result bootstrap_allgather(const UniqueId& id, int rank, int nranks,
                           const std::vector<uint8_t>& payload, double timeout_seconds,
                           std::vector<std::vector<uint8_t>>* table);

}  // namespace terse
