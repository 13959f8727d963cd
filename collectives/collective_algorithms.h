// The algorithms of every collective except allreduce (whose algorithms live in
// allreduce_*.cpp), each an AlgorithmFunction listed in algorithm_table.cpp. Each file says how
// it moves data, what temporary memory it needs, and when it wins.
//
// Conventions they share: buffers are host memory; `args` has been checked by the communicator
// (valid type, root/peer in range, non-null buffers where used, no size overflow); messages of
// one call are tagged make_operation(context.sequence, step), and for each pair of ranks the
// receiver posts its receives in the order the sender sends, which makes the 12-bit step's
// wrap harmless; big messages are cut into pieces of context.piece_bytes with a bounded
// number in flight.
#pragma once

#include <nccl.h>

#include "collectives/collective_args.h"

namespace terse {

// allgather_ring.cpp
ncclResult_t run_ring_allgather(const CollectiveArgs& args, const AlgorithmContext& context);
// reduce_scatter_ring.cpp
ncclResult_t run_ring_reduce_scatter(const CollectiveArgs& args, const AlgorithmContext& context);
// broadcast_tree.cpp
ncclResult_t run_binomial_broadcast(const CollectiveArgs& args, const AlgorithmContext& context);
ncclResult_t run_chain_broadcast(const CollectiveArgs& args, const AlgorithmContext& context);
// reduce_tree.cpp
ncclResult_t run_binomial_reduce(const CollectiveArgs& args, const AlgorithmContext& context);
ncclResult_t run_chain_reduce(const CollectiveArgs& args, const AlgorithmContext& context);
// alltoall_pairwise.cpp
ncclResult_t run_pairwise_alltoall(const CollectiveArgs& args, const AlgorithmContext& context);
// gather_scatter_direct.cpp
ncclResult_t run_direct_gather(const CollectiveArgs& args, const AlgorithmContext& context);
ncclResult_t run_direct_scatter(const CollectiveArgs& args, const AlgorithmContext& context);
// send_recv.cpp: one message; context.sequence is the per-peer number (operation_numbers.h).
ncclResult_t run_direct_send(const CollectiveArgs& args, const AlgorithmContext& context);
ncclResult_t run_direct_recv(const CollectiveArgs& args, const AlgorithmContext& context);

}  // namespace terse
