// The dense allreduce algorithms on host buffers, each with the signature of an
// AlgorithmInfo::run (algorithm_table.h); the table picks among them by size
// (allreduce_selection.h).
#pragma once

#include <nccl.h>

#include <cstddef>

#include "collectives/collective_args.h"

namespace terse {

// Ring reduce-scatter + allgather, pipelined in pieces of context.piece_bytes: each rank
// sends 2(n-1)/n of the buffer in 2(n-1) steps. The choice for large messages.
ncclResult_t ring_allreduce(const CollectiveArgs& args, const AlgorithmContext& context);

// Whole-buffer exchanges with rank ^ 2^k for log2(n) rounds (plus a fold for the ranks beyond
// a power of two): few steps, but every rank sends the whole buffer each round. The choice for
// small messages. Every rank computes the same operations in the same order, so the result is
// bitwise identical on all ranks.
ncclResult_t recursive_doubling_allreduce(const CollectiveArgs& args,
                                          const AlgorithmContext& context);

}  // namespace terse
