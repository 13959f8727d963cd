// Alltoall: every rank sends block p of its input to rank p and receives rank p's block for it
// into block p of its output. Out of place, every receive and every send is posted at once
// (sends in the order r+1, r+2, ... so that the ranks do not all start on the same peer) and
// then waited together: UCX moves large blocks zero-copy (rendezvous), so there is nothing to
// stage and no memory besides the output.
//
// In place (send == recv), a block may only be overwritten once it has been sent, so the ranks
// exchange in pairs instead: at step i rank r trades block p with rank p = (i - r) mod n (a
// pairing: p's partner at step i is r), each block travelling in pieces through kInPlaceWindow
// pieces of scratch. Slower (one peer at a time), but correct and bounded in memory.
#include <algorithm>
#include <cstring>

#include "collectives/algorithm_scratch.h"
#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Pieces of one in-place exchange in flight at once.
constexpr size_t kInPlaceWindow = 4;

ncclResult_t alltoall_in_place(const CollectiveArgs& args, const AlgorithmContext& context) {
  Transport& transport = *context.transport;
  const int rank = transport.rank(), nranks = transport.nranks();
  const size_t element_bytes = nccl_type_size(args.type);
  const size_t count = args.count;
  uint8_t* data = static_cast<uint8_t*>(args.recv);
  const size_t piece = std::min(piece_elements(context, args.type), count);
  const size_t pieces = pipeline_piece_count(count, piece);
  // Piece k arrives in scratch slot k % kInPlaceWindow (request slot likewise) and is copied
  // into place once the send of the same piece (request slot kInPlaceWindow + k % ...) is done.
  AlgorithmScratch scratch(kInPlaceWindow * piece * element_bytes, context.scratch);
  auto slot_data = [&](size_t k) {
    return scratch.data() + (k % kInPlaceWindow) * piece * element_bytes;
  };
  InFlightTransfers transfers(&transport, 2 * kInPlaceWindow, context.deadline);
  for (int step = 0; step < nranks; ++step) {
    const int partner = ((step - rank) % nranks + nranks) % nranks;
    if (partner == rank) continue;  // its own block stays where it is
    const ElementRange block{static_cast<size_t>(partner) * count, count};
    auto where = [&](size_t k) {
      return data + pipeline_piece(block, piece, k).offset * element_bytes;
    };
    auto bytes = [&](size_t k) { return pipeline_piece(block, piece, k).count * element_bytes; };
    size_t posted = 0;
    for (size_t k = 0; k < pieces; ++k) {
      for (; posted < pieces && posted < k + kInPlaceWindow; ++posted) {
        const uint32_t operation = make_operation(context.sequence, posted);
        const size_t slot = posted % kInPlaceWindow;
        TERSE_CHECK(transfers.recv(slot, partner, operation, slot_data(posted), bytes(posted)));
        TERSE_CHECK(transfers.send(kInPlaceWindow + slot, partner, operation, where(posted),
                                   bytes(posted)));
      }
      const size_t slot = k % kInPlaceWindow;
      TERSE_CHECK(transfers.wait(slot));
      TERSE_CHECK(transfers.wait(kInPlaceWindow + slot));
      std::memcpy(where(k), slot_data(k), bytes(k));
    }
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t run_pairwise_alltoall(const CollectiveArgs& args, const AlgorithmContext& context) {
  Transport& transport = *context.transport;
  const int rank = transport.rank(), nranks = transport.nranks();
  const size_t block_bytes = args.count * nccl_type_size(args.type);
  if (block_bytes == 0) return ncclSuccess;
  if (args.send == args.recv) return alltoall_in_place(args, context);

  const uint8_t* send = static_cast<const uint8_t*>(args.send);
  uint8_t* recv = static_cast<uint8_t*>(args.recv);
  const size_t own = static_cast<size_t>(rank) * block_bytes;
  std::memcpy(recv + own, send + own, block_bytes);
  const size_t peers = static_cast<size_t>(nranks - 1);
  // Slots: the receive from rank r - i in i - 1, the send to rank r + i in peers + i - 1.
  InFlightTransfers transfers(&transport, 2 * peers, context.deadline);
  const uint32_t operation = make_operation(context.sequence, 0);
  for (int i = 1; i < nranks; ++i) {
    const int from = (rank - i + nranks) % nranks;
    TERSE_CHECK(transfers.recv(i - 1, from, operation,
                               recv + static_cast<size_t>(from) * block_bytes, block_bytes));
  }
  for (int i = 1; i < nranks; ++i) {
    const int to = (rank + i) % nranks;
    TERSE_CHECK(transfers.send(peers + i - 1, to, operation,
                               send + static_cast<size_t>(to) * block_bytes, block_bytes));
  }
  return transfers.wait_all();
}

}  // namespace terse
