// The compressed allreduce algorithms, each in its own file with the signature of a
// CompressedAlgorithmInfo::run (compressed_algorithm_table.h, which says when each is chosen).
#pragma once

#include <nccl.h>

#include "collectives/compressed/compressed_args.h"
#include "collectives/cost_model.h"

namespace terse {

// A row of compressed_algorithm_table.h (the composites take their inner algorithm as one).
struct CompressedAlgorithmInfo;

// Scatter-reduce-allgather (compressed_sra.cpp): encode once, all-to-all of chunks, owners
// decode and sum, re-encode with their own residual, allgather of the encoded chunks, decode.
// Two lossy steps whatever the rank count. The default for quantizers on large tensors.
ncclResult_t compressed_sra_allreduce(const CompressedArgs& args, const CompressedContext& context);
// Its owner residual: the largest chunk of `count` elements over `group`'s ranks.
size_t sra_stage_residual_elements(const CompressedAlgorithmInfo* inner, const Codec& codec,
                                   size_t count, DType dtype, const PeerGroup& group);

// Compressed ring (compressed_ring.cpp): reduce-scatter with decode-add-re-encode at every
// hop, then an allgather that forwards the owners' encoded chunks unchanged; pipelined in
// pieces. The error grows with the rank count (n lossy steps).
ncclResult_t compressed_ring_allreduce(const CompressedArgs& args,
                                       const CompressedContext& context);

// Compressed recursive doubling (compressed_recursive_doubling.cpp): log2(n) rounds of
// whole-buffer encoded exchanges (plus a fold for ranks beyond a power of two): few, large
// messages; the error grows with log n only.
ncclResult_t compressed_recursive_doubling_allreduce(const CompressedArgs& args,
                                                     const CompressedContext& context);

// Compressed tree (compressed_tree.cpp): reduce up a binary tree re-encoding partial sums,
// broadcast of the root's encoded result down. For small messages: 2 log2(n) latencies.
ncclResult_t compressed_tree_allreduce(const CompressedArgs& args,
                                       const CompressedContext& context);

// Sparse allgather (sparse_allgather.cpp): allgatherv of every rank's (index, value) message,
// scatter-add; switches to a dense exchange when the union of the selections gets dense
// (SparCML's rule).
ncclResult_t sparse_allgather_allreduce(const CompressedArgs& args,
                                        const CompressedContext& context);

// Random-K with a shared seed (randomk_allreduce.cpp): every rank keeps the same positions, so
// a dense allreduce of only the k values suffices.
ncclResult_t randomk_allreduce(const CompressedArgs& args, const CompressedContext& context);

// PowerSGD (powersgd_allreduce.cpp): P = M Q, allreduce(P), orthogonalise, Q = M^T P,
// allreduce(Q), M^ = P Q^T, with the warm-started Q and the residual of the tensor's entry.
ncclResult_t powersgd_allreduce(const CompressedArgs& args, const CompressedContext& context);

// Hierarchical (hierarchical_allreduce.cpp): an uncompressed reduce inside each node (nodes
// by host identity, TERSE_HOSTID), the default compressed algorithm among one leader per
// node, an uncompressed broadcast inside each node.
ncclResult_t hierarchical_allreduce(const CompressedArgs& args, const CompressedContext& context);
// Its structure exists wherever the group spans nodes.
bool hierarchical_applies(const GroupShape& shape, bool equal_nodes);
// The stage residual of `inner` (null: the default for the codec and size) as the leaders run
// it (on the leaders' group), or as it runs flat when the nodes do not make a hierarchy pay.
size_t hierarchical_stage_residual_elements(const CompressedAlgorithmInfo* inner,
                                            const Codec& codec, size_t count, DType dtype,
                                            const PeerGroup& group);

// Rail-aligned (rail_allreduce.cpp): a reduce-scatter inside each node, local rank i running
// the compressed algorithm for chunk i with local rank i of every other node (its rail), an
// allgather inside each node. Nodes of equal size; stateless codecs.
ncclResult_t rail_allreduce(const CompressedArgs& args, const CompressedContext& context);
// Its structure exists on several nodes of equal size above one rank (node_groups.h's
// rails_apply, in the cost model's terms).
bool rail_applies(const GroupShape& shape, bool equal_nodes);
// The stage residual of `inner` (null: the default for the codec and size) as a rail runs it on
// the largest chunk (or as it runs flat on uneven layouts).
size_t rail_stage_residual_elements(const CompressedAlgorithmInfo* inner, const Codec& codec,
                                    size_t count, DType dtype, const PeerGroup& group);

}  // namespace terse
