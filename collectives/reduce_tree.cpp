// Reduce up a tree, in pieces: every rank combines its own contribution with what each child
// sends for a piece and passes the partial result to its parent, the root finishing it in its
// output. Pieces stream up the tree, so the levels work at the same time. Two trees
// (tree_pattern.h), as for broadcast:
//   binomial: ceil(log2 n) levels, but a rank receives from up to log2 n children: small
//             messages;
//   chain:    n-1 hops, one message per link and piece: large messages.
// The ReduceOp's ends (reduce_op_stages.h) apply to each rank's contribution and, at the root,
// to the result.
//
// Memory: per child kPiecesAhead pieces of scratch for what arrives, and (below the root)
// kAccumulators pieces for partial results waiting for their send; nothing proportional to the
// tensor. The tree has no cycles, so waiting for a send to free an accumulator cannot deadlock:
// the parent never waits on its child's later pieces before taking the earlier ones.
#include <algorithm>
#include <vector>

#include "collectives/algorithm_scratch.h"
#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/reduce_op_stages.h"
#include "collectives/ring_pattern.h"
#include "collectives/tree_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

constexpr size_t kPiecesAhead = 2;
constexpr size_t kAccumulators = 3;

// `parent` is -1 at the root; `children` in the order their contributions are combined.
ncclResult_t reduce_up_tree(const CollectiveArgs& args, const AlgorithmContext& context, int parent,
                            const std::vector<int>& children) {
  Transport& transport = *context.transport;
  const size_t element_bytes = nccl_type_size(args.type);
  const size_t count = args.count;
  const bool is_root = parent < 0;
  const uint8_t* send = static_cast<const uint8_t*>(args.send);
  uint8_t* recv = static_cast<uint8_t*>(args.recv);
  if (count == 0) return ncclSuccess;
  if (transport.nranks() == 1) {
    prepare_contribution(args.type, args.op, recv, send, count);
    finish_result(args.type, args.op, recv, count);
    return ncclSuccess;
  }

  const size_t piece = std::min(piece_elements(context, args.type), count);
  const size_t piece_bytes = piece * element_bytes;
  const size_t pieces = pipeline_piece_count(count, piece);
  auto piece_of = [&](size_t k) { return pipeline_piece(ElementRange{0, count}, piece, k); };
  const size_t fanout = children.size();
  const size_t accumulators = is_root ? 0 : kAccumulators;

  // Scratch: the children's pieces (piece k of child i in (k % kPiecesAhead) * fanout + i),
  // then the accumulators. Request slots use the same numbering.
  AlgorithmScratch scratch((kPiecesAhead * fanout + accumulators) * piece_bytes, context.scratch);
  auto child_slot = [&](size_t k, size_t i) { return (k % kPiecesAhead) * fanout + i; };
  auto accumulator_slot = [&](size_t k) { return kPiecesAhead * fanout + k % kAccumulators; };
  auto slot_data = [&](size_t slot) { return scratch.data() + slot * piece_bytes; };
  InFlightTransfers transfers(&transport, kPiecesAhead * fanout + accumulators, context.deadline);

  size_t receives_posted = 0;  // pieces whose receives from every child are posted
  for (size_t k = 0; k < pieces; ++k) {
    for (; receives_posted < pieces && receives_posted < k + kPiecesAhead; ++receives_posted) {
      const size_t bytes = piece_of(receives_posted).count * element_bytes;
      for (size_t i = 0; i < fanout; ++i) {
        const size_t slot = child_slot(receives_posted, i);
        TERSE_CHECK(transfers.recv(slot, children[i],
                                   make_operation(context.sequence, receives_posted),
                                   slot_data(slot), bytes));
      }
    }
    const ElementRange range = piece_of(k);
    uint8_t* accumulator = nullptr;
    if (is_root) {
      accumulator = recv + range.offset * element_bytes;
    } else {
      const size_t slot = accumulator_slot(k);
      if (transfers.posted(slot)) TERSE_CHECK(transfers.wait(slot));  // its last send
      accumulator = slot_data(slot);
    }
    // In place at the root, the accumulator is this rank's contribution already.
    prepare_contribution(args.type, args.op, accumulator, send + range.offset * element_bytes,
                         range.count);
    for (size_t i = 0; i < fanout; ++i) {
      const size_t slot = child_slot(k, i);
      TERSE_CHECK(transfers.wait(slot));
      reduce_into(args.type, args.op.kind, accumulator, slot_data(slot), range.count);
    }
    if (is_root) {
      finish_result(args.type, args.op, accumulator, range.count);
    } else {
      TERSE_CHECK(transfers.send(accumulator_slot(k), parent, make_operation(context.sequence, k),
                                 accumulator, range.count * element_bytes));
    }
  }
  return transfers.wait_all();
}

}  // namespace

ncclResult_t run_binomial_reduce(const CollectiveArgs& args, const AlgorithmContext& context) {
  const BinomialTree tree(context.transport->rank(), context.transport->nranks(), args.root);
  return reduce_up_tree(args, context, tree.parent(), tree.children());
}

ncclResult_t run_chain_reduce(const CollectiveArgs& args, const AlgorithmContext& context) {
  const Chain chain(context.transport->rank(), context.transport->nranks(), args.root);
  return reduce_up_tree(args, context, chain.parent(), chain.children());
}

}  // namespace terse
