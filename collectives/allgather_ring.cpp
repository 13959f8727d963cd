// Ring allgather: n-1 steps in which every rank forwards to next() the block it received at the
// previous step (ring_pattern.h). Each block is cut into pieces, and the pieces travel the ring
// one after another (piece-major order: piece k goes through all n-1 steps while piece k+1
// follows a hop behind), so a rank forwards a piece as soon as it arrives. Every link carries
// (n-1)/n of the output once: bandwidth-optimal, latency n-1 hops.
//
// A piece's first step sends this rank's own data, which depends on nothing, so those sends
// run up to kFirstSendsAhead pieces ahead; otherwise every piece would wait for the previous
// one to go round the whole ring, and the ring would run at one piece per ring latency.
//
// Memory: none besides the output. Pieces are received straight into place and sent from
// there; at most kWindow receives and kWindow + kFirstSendsAhead sends are in flight.
//
// Step numbers (12 bits) wrap for calls of more than 4096 messages per link. That is safe
// because the receiver posts its receives in message order and the sender sends in message
// order but for the first-step sends, which run ahead by fewer than kMaxMessagesAhead (< 4096)
// messages: two messages with equal step numbers never overtake each other, and UCX matches
// equal tags in order.
#include <algorithm>
#include <cstring>

#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

constexpr size_t kWindow = 8;
constexpr size_t kFirstSendsAhead = 4;
constexpr size_t kMaxMessagesAhead = 1024;

}  // namespace

ncclResult_t run_ring_allgather(const CollectiveArgs& args, const AlgorithmContext& context) {
  Transport& transport = *context.transport;
  const RingPattern ring(transport.rank(), transport.nranks());
  const size_t element_bytes = nccl_type_size(args.type);
  const size_t count = args.count;
  const size_t block_bytes = count * element_bytes;
  uint8_t* recv = static_cast<uint8_t*>(args.recv);

  // In place (NCCL: send == recv + rank * count) the own block is already there.
  uint8_t* own = recv + static_cast<size_t>(ring.rank()) * block_bytes;
  if (block_bytes > 0 && args.send != own) std::memmove(own, args.send, block_bytes);
  if (ring.nranks() == 1 || count == 0) return ncclSuccess;

  const size_t piece = piece_elements(context, args.type);
  const size_t pieces = pipeline_piece_count(count, piece);
  const size_t steps = static_cast<size_t>(ring.steps());
  const size_t messages = pieces * steps;  // message j: piece j / steps at step j % steps
  const size_t first_sends_ahead =
      std::max<size_t>(1, std::min(kFirstSendsAhead, kMaxMessagesAhead / steps));
  auto message_bytes = [&](size_t j, int block, uint8_t** where) {
    ElementRange range = pipeline_piece(ElementRange{block * count, count}, piece, j / steps);
    *where = recv + range.offset * element_bytes;
    return range.count * element_bytes;
  };

  // Request slots: receive of message j in j % kWindow; forwarded sends (in order) in the next
  // kWindow; the first-step send of piece k in the last kFirstSendsAhead.
  const size_t forward_base = kWindow, first_base = 2 * kWindow;
  InFlightTransfers transfers(&transport, 2 * kWindow + kFirstSendsAhead, context.deadline);
  auto post_send = [&](size_t j, size_t slot) {
    uint8_t* data = nullptr;
    size_t bytes = message_bytes(j, ring.allgather_send_block(static_cast<int>(j % steps)), &data);
    return transfers.send(slot, ring.next(), make_operation(context.sequence, j), data, bytes);
  };
  size_t first_sends_posted = 0;  // pieces
  // Posts first-step sends up to `through` (a piece), waiting for a slot only when `wait`.
  auto post_first_sends = [&](size_t through, bool wait) {
    for (; first_sends_posted < pieces && first_sends_posted <= through; ++first_sends_posted) {
      const size_t slot = first_base + first_sends_posted % first_sends_ahead;
      if (!transfers.finished(slot)) {
        if (!wait) break;
        TERSE_CHECK(transfers.wait(slot));
      }
      TERSE_CHECK(post_send(first_sends_posted * steps, slot));
    }
    return ncclSuccess;
  };

  size_t receives_posted = 0, forwards_posted = 0;
  for (size_t j = 0; j < messages; ++j) {
    const size_t k = j / steps;
    // This piece's first step must be out before waiting; later ones go when a slot is free.
    TERSE_CHECK(post_first_sends(k, /*wait=*/true));
    TERSE_CHECK(post_first_sends(k + first_sends_ahead - 1, /*wait=*/false));
    for (; receives_posted < messages && receives_posted < j + kWindow; ++receives_posted) {
      const size_t m = receives_posted;
      uint8_t* data = nullptr;
      size_t bytes =
          message_bytes(m, ring.allgather_recv_block(static_cast<int>(m % steps)), &data);
      TERSE_CHECK(transfers.recv(m % kWindow, ring.previous(), make_operation(context.sequence, m),
                                 data, bytes));
    }
    TERSE_CHECK(transfers.wait(j % kWindow));
    // What arrived at step s is what goes on at step s + 1.
    if (j % steps + 1 < steps) {
      const size_t slot = forward_base + forwards_posted++ % kWindow;
      if (transfers.posted(slot)) TERSE_CHECK(transfers.wait(slot));
      TERSE_CHECK(post_send(j + 1, slot));
    }
  }
  return transfers.wait_all();
}

}  // namespace terse
