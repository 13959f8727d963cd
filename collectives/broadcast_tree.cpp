// Broadcast down a tree, in pieces: every non-root rank receives each piece from its parent
// straight into its output and forwards it to its children as soon as it arrived, so pieces
// stream down the tree. Two trees (tree_pattern.h):
//   binomial: ceil(log2 n) hops, but the root sends the whole message log2 n times; the choice
//             for small messages, where latency is all.
//   chain:    n-1 hops, but every link carries the message once; with pieces in flight it runs
//             at one link's bandwidth whatever n: the choice for large messages.
// Memory: none besides the output; at most kReceivesAhead receives and kSendWindow pieces of
// sends per child in flight.
#include <cstring>
#include <vector>

#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "collectives/tree_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

constexpr size_t kReceivesAhead = 8;
constexpr size_t kSendWindow = 4;

// `parent` is -1 at the root; `children` in the order their subtrees grow (largest last).
ncclResult_t broadcast_down_tree(const CollectiveArgs& args, const AlgorithmContext& context,
                                 int parent, const std::vector<int>& children) {
  Transport& transport = *context.transport;
  const size_t element_bytes = nccl_type_size(args.type);
  const size_t count = args.count;
  const bool is_root = parent < 0;
  uint8_t* recv = static_cast<uint8_t*>(args.recv);
  if (is_root && count > 0 && args.send != args.recv) {
    std::memcpy(recv, args.send, count * element_bytes);
  }
  if (count == 0 || transport.nranks() == 1) return ncclSuccess;

  // The root sends from its input directly (no need to wait for the copy above).
  const uint8_t* source = is_root ? static_cast<const uint8_t*>(args.send) : recv;
  const size_t piece = piece_elements(context, args.type);
  const size_t pieces = pipeline_piece_count(count, piece);
  auto piece_of = [&](size_t k) { return pipeline_piece(ElementRange{0, count}, piece, k); };
  const size_t fanout = children.size();
  // Slots: receives of piece k in k % kReceivesAhead, then sends of piece k to child i in
  // kReceivesAhead + (k % kSendWindow) * fanout + i.
  InFlightTransfers transfers(&transport, kReceivesAhead + kSendWindow * fanout, context.deadline);
  size_t receives_posted = 0;
  for (size_t k = 0; k < pieces; ++k) {
    const ElementRange range = piece_of(k);
    if (!is_root) {
      for (; receives_posted < pieces && receives_posted < k + kReceivesAhead; ++receives_posted) {
        const ElementRange ahead = piece_of(receives_posted);
        TERSE_CHECK(transfers.recv(receives_posted % kReceivesAhead, parent,
                                   make_operation(context.sequence, receives_posted),
                                   recv + ahead.offset * element_bytes,
                                   ahead.count * element_bytes));
      }
      TERSE_CHECK(transfers.wait(k % kReceivesAhead));
    }
    // Largest subtree first: it has the longest way to go.
    for (size_t i = fanout; i-- > 0;) {
      const size_t slot = kReceivesAhead + (k % kSendWindow) * fanout + i;
      if (transfers.posted(slot)) TERSE_CHECK(transfers.wait(slot));
      TERSE_CHECK(transfers.send(slot, children[i], make_operation(context.sequence, k),
                                 source + range.offset * element_bytes,
                                 range.count * element_bytes));
    }
  }
  return transfers.wait_all();
}

}  // namespace

ncclResult_t run_binomial_broadcast(const CollectiveArgs& args, const AlgorithmContext& context) {
  const BinomialTree tree(context.transport->rank(), context.transport->nranks(), args.root);
  return broadcast_down_tree(args, context, tree.parent(), tree.children());
}

ncclResult_t run_chain_broadcast(const CollectiveArgs& args, const AlgorithmContext& context) {
  const Chain chain(context.transport->rank(), context.transport->nranks(), args.root);
  return broadcast_down_tree(args, context, chain.parent(), chain.children());
}

}  // namespace terse
