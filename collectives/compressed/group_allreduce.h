// Exact (uncompressed) fp32 sums over a PeerGroup, for the compressed algorithms whose lossy
// step is elsewhere: Random-K's k shared values, PowerSGD's factors P and Q, sparse allgather's
// dense fallback, a hierarchical call's node-level phases. The dense ring of allreduce_ring.cpp
// works on a whole communicator; these work on any group of its ranks, tagged inside the calling
// algorithm's operation so that they can run as phases of one call.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "collectives/compressed/compressed_args.h"

namespace terse {

// Tag steps group_allreduce_sum uses on a group of `ranks`: [first_step, first_step + this).
constexpr uint32_t group_allreduce_steps(int ranks) {
  return ranks > 1 ? static_cast<uint32_t>(2 * (ranks - 1)) : 0;
}

// values[0 .. count) = the sum over the group of every rank's values, in place: a ring
// reduce-scatter then allgather over group positions (each block is summed once, by its owner,
// and copied to the others, so every rank ends with identical bits). `scratch` holds at least
// group_allreduce_scratch(count, ranks) floats. Messages are tagged
// make_operation(context.sequence, first_step + s) for s < group_allreduce_steps(ranks).
ncclResult_t group_allreduce_sum(float* values, size_t count, const CompressedContext& context,
                                 uint32_t first_step, float* scratch);

// Floats of scratch group_allreduce_sum needs: the largest block.
inline size_t group_allreduce_scratch(size_t count, int ranks) {
  return ranks > 0 ? (count + static_cast<size_t>(ranks) - 1) / static_cast<size_t>(ranks) : 0;
}

}  // namespace terse
