// Exact (uncompressed) fp32 sums over a PeerGroup, for the compressed algorithms whose lossy
// step is elsewhere: Random-K's k shared values, PowerSGD's factors P and Q, sparse allgather's
// dense fallback. They are the dense pipelined ring of allreduce_ring.cpp run over the call's
// group (ring_allreduce_in_group), tagged inside the calling algorithm's operation so that they
// can run as phases of one call.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "collectives/allreduce_algorithms.h"
#include "collectives/compressed/compressed_args.h"

namespace terse {

// Tag steps group_allreduce_sum uses on a group of `ranks`: [first_step, first_step + this).
constexpr uint32_t group_allreduce_steps(int ranks) {
  return ring_allreduce_steps(ranks);
}

// values[0 .. count) = the sum over the group of every rank's values, in place: the ring's
// reduce-scatter then allgather over group positions, pipelined in pieces of
// context.piece_bytes (each block is summed once, by its owner, in a fixed order, and copied to
// the others, so every rank ends with identical bits). Messages are tagged
// make_operation(context.sequence, first_step + s) for s < group_allreduce_steps(ranks); what
// this rank sent goes into context.counters.
ncclResult_t group_allreduce_sum(float* values, size_t count, const CompressedContext& context,
                                 uint32_t first_step);

}  // namespace terse
