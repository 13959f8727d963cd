// The dense allreduce algorithms on host buffers, each with the signature of an
// AlgorithmInfo::run (algorithm_table.h); the table picks among them by size
// (allreduce_selection.h).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "collectives/collective_args.h"
#include "collectives/peer_group.h"

namespace terse {

// What one rank sent during a call (messages to itself excluded), for callers that account
// for their traffic (the compressed algorithms' counters).
struct SentTraffic {
  uint64_t bytes = 0;
  uint64_t messages = 0;
};

// An allreduce run as one phase of a larger call, over an ordered group of the communicator's
// ranks (peer_group.h): the algorithms arrange group positions, so `group`'s order is the
// ring's order and its partners' numbering. Every rank of the group calls with the same group,
// args (but its own buffers) and first_step; ranks outside it do not take part. Messages are
// tagged make_operation(context.sequence, first_step + s) for s below the algorithm's
// *_allreduce_steps(group size), so that other phases of the call use the steps around them.
struct GroupPhase {
  const PeerGroup* group = nullptr;  // null: every rank of the transport, in rank order
  uint32_t first_step = 0;
  SentTraffic* sent = nullptr;  // when set, gets what this rank sent added
};

// Ring reduce-scatter + allgather, pipelined in pieces of context.piece_bytes: each rank
// sends 2(n-1)/n of the buffer in 2(n-1) steps. The choice for large messages. Each block is
// reduced once, by the rank that ends owning it, in a fixed order (ring_pattern.h: the partial
// sum travels the ring from the owner's successor to the owner, each rank combining its own
// contribution with what it received), and copied to the others, so every rank ends with
// identical bits. The whole-communicator form is the group form over every rank.
ncclResult_t ring_allreduce(const CollectiveArgs& args, const AlgorithmContext& context);
ncclResult_t ring_allreduce_in_group(const CollectiveArgs& args, const AlgorithmContext& context,
                                     const GroupPhase& phase);
// Tag steps of the ring over `ranks` positions: one per ring step (a step's pieces share it:
// UCX matches messages of one sender and tag in the order they were sent, and both sides
// handle pieces in the same order).
constexpr uint32_t ring_allreduce_steps(int ranks) {
  return ranks > 1 ? static_cast<uint32_t>(2 * (ranks - 1)) : 0;
}

// Whole-buffer exchanges with rank ^ 2^k for log2(n) rounds (plus a fold for the ranks beyond
// a power of two): few steps, but every rank sends the whole buffer each round. The choice for
// small messages. Every rank computes the same operations in the same order, so the result is
// bitwise identical on all ranks.
ncclResult_t recursive_doubling_allreduce(const CollectiveArgs& args,
                                          const AlgorithmContext& context);
ncclResult_t recursive_doubling_allreduce_in_group(const CollectiveArgs& args,
                                                   const AlgorithmContext& context,
                                                   const GroupPhase& phase);
// Tag steps of recursive doubling over `ranks` positions: the fold, the rounds, the unfold.
uint32_t recursive_doubling_allreduce_steps(int ranks);

}  // namespace terse
