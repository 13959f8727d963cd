// Ring reduce-scatter: n-1 steps in which every rank adds its own contribution to the partial
// sum it received and passes it on (ring_pattern.h); after the last step rank r holds block r
// reduced over every rank. Blocks are cut into pieces that travel the ring one after another
// (piece-major order), so reduction and communication overlap. Bandwidth-optimal like the
// ring allgather; n-1 hops of latency.
//
// The ReduceOp's ends (reduce_op_stages.h): each rank's own contribution enters scaled when
// op.scale_input (PreMulSum, float average), and the finished block is divided when
// op.divide_result (integer average).
//
// A piece's first step sends this rank's own contribution, which depends on nothing, so those
// sends run up to kFirstSendsAhead pieces ahead (otherwise each piece would wait for the
// previous one to go round the ring).
//
// Memory: kSlots pieces of scratch (a received partial sum lives in a slot until its forward
// send finished), kFirstSendsAhead pieces for scaled first-step contributions (PreMulSum and
// float average only) and one piece for scaled inputs; nothing proportional to the tensor.
//
// Deadlock freedom with slots that wait for sends: a rank only ever blocks on a send of a
// message numbered below the one it is working on (a slot for the receive it needs next, whose
// slots then all hold older forwards; a first-step slot, held by an older piece's first step).
// That send completes once next() posts the matching receive, which next() does before
// blocking on anything numbered higher. Following the waits around the ring, message numbers
// strictly decrease, so they cannot close a cycle, given kSlots >= 2.
//
// Step numbers wrap as in allgather_ring.cpp, and are safe for the same reasons.
#include <algorithm>
#include <deque>

#include "collectives/algorithm_scratch.h"
#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/reduce_op_stages.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

constexpr size_t kSlots = 4;            // pieces of scratch for partial sums
constexpr size_t kReceivesAhead = 2;    // receives posted beyond the one waited for
constexpr size_t kFirstSendsAhead = 4;  // pieces whose first-step send may be in flight
constexpr size_t kMaxMessagesAhead = 1024;

}  // namespace

ncclResult_t run_ring_reduce_scatter(const CollectiveArgs& args, const AlgorithmContext& context) {
  Transport& transport = *context.transport;
  const RingPattern ring(transport.rank(), transport.nranks());
  const size_t element_bytes = nccl_type_size(args.type);
  const size_t count = args.count;
  const uint8_t* send = static_cast<const uint8_t*>(args.send);
  uint8_t* recv = static_cast<uint8_t*>(args.recv);
  // This rank's contribution to element `offset` of block `block`.
  auto own = [&](int block, size_t offset) {
    return send + (static_cast<size_t>(block) * count + offset) * element_bytes;
  };

  if (count == 0) return ncclSuccess;
  if (ring.nranks() == 1) {
    prepare_contribution(args.type, args.op, recv, own(0, 0), count);
    finish_result(args.type, args.op, recv, count);
    return ncclSuccess;
  }

  const size_t piece = std::min(piece_elements(context, args.type), count);
  const size_t piece_bytes = piece * element_bytes;
  const size_t pieces = pipeline_piece_count(count, piece);
  const size_t steps = static_cast<size_t>(ring.steps());
  const size_t messages = pieces * steps;  // message j: piece j / steps at step j % steps
  const size_t first_sends_ahead =
      std::max<size_t>(1, std::min(kFirstSendsAhead, kMaxMessagesAhead / steps));
  auto piece_of = [&](size_t j) {
    return pipeline_piece(ElementRange{0, count}, piece, j / steps);
  };

  // Scratch: kSlots partial sums, then (scaling only) the first-step contributions, then one
  // piece for this rank's scaled contribution at later steps.
  const bool scaled = args.op.scale_input;
  const size_t first_pieces = scaled ? kFirstSendsAhead : 0;
  AlgorithmScratch scratch((kSlots + first_pieces + 1) * piece_bytes, context.scratch);
  auto slot_data = [&](size_t slot) { return scratch.data() + slot * piece_bytes; };
  uint8_t* scaled_piece = slot_data(kSlots + first_pieces);

  // Request slots: the receive into scratch slot s uses s, the forward out of it kSlots + s,
  // the first-step send of piece k 2 * kSlots + k % first_sends_ahead.
  const size_t first_base = 2 * kSlots;
  InFlightTransfers transfers(&transport, 2 * kSlots + kFirstSendsAhead, context.deadline);
  std::deque<size_t> free_slots;
  std::deque<size_t> forwarding_slots;  // oldest forward first
  for (size_t slot = 0; slot < kSlots; ++slot) free_slots.push_back(slot);
  // A scratch slot: a free one, else the oldest one whose forward has finished (with `wait`:
  // once it has). Returns false (without waiting) when none is ready, or on error.
  auto take_slot = [&](bool wait, size_t* slot, ncclResult_t* result) {
    *result = ncclSuccess;
    if (!free_slots.empty()) {
      *slot = free_slots.front();
      free_slots.pop_front();
      return true;
    }
    if (forwarding_slots.empty()) return false;
    const size_t oldest = forwarding_slots.front();
    if (!wait && !transfers.finished(kSlots + oldest)) return false;
    *result = transfers.wait(kSlots + oldest);
    if (*result != ncclSuccess) return false;
    forwarding_slots.pop_front();
    *slot = oldest;
    return true;
  };

  size_t first_sends_posted = 0;  // pieces
  // Posts first-step sends up to piece `through`, waiting for a slot only when `wait`.
  auto post_first_sends = [&](size_t through, bool wait) {
    for (; first_sends_posted < pieces && first_sends_posted <= through; ++first_sends_posted) {
      const size_t k = first_sends_posted;
      const size_t slot = k % first_sends_ahead;
      if (!transfers.finished(first_base + slot)) {
        if (!wait) break;
        TERSE_CHECK(transfers.wait(first_base + slot));
      }
      const size_t j = k * steps;
      const ElementRange range = piece_of(j);
      const uint8_t* data = own(ring.reduce_scatter_send_block(0), range.offset);
      if (scaled) {
        uint8_t* contribution = slot_data(kSlots + slot);
        prepare_contribution(args.type, args.op, contribution, data, range.count);
        data = contribution;
      }
      TERSE_CHECK(transfers.send(first_base + slot, ring.next(),
                                 make_operation(context.sequence, j), data,
                                 range.count * element_bytes));
    }
    return ncclSuccess;
  };

  std::deque<size_t> receiving_slots;  // scratch slot of each posted, unprocessed message
  size_t receives_posted = 0;
  for (size_t j = 0; j < messages; ++j) {
    const int step = static_cast<int>(j % steps);
    const size_t k = j / steps;
    const ElementRange range = piece_of(j);
    // This piece's first step must be out before waiting; later ones go when a slot is free.
    TERSE_CHECK(post_first_sends(k, /*wait=*/true));
    TERSE_CHECK(post_first_sends(k + first_sends_ahead - 1, /*wait=*/false));
    // Post the receive needed now (waiting for a slot if need be), and a few beyond it while
    // slots are ready without waiting.
    for (; receives_posted < messages && receives_posted <= j + kReceivesAhead; ++receives_posted) {
      size_t slot = 0;
      ncclResult_t result = ncclSuccess;
      if (!take_slot(receives_posted == j, &slot, &result)) {
        if (result != ncclSuccess) return result;
        break;
      }
      const size_t m = receives_posted;
      TERSE_CHECK(transfers.recv(slot, ring.previous(), make_operation(context.sequence, m),
                                 slot_data(slot), piece_of(m).count * element_bytes));
      receiving_slots.push_back(slot);
    }
    const size_t slot = receiving_slots.front();
    receiving_slots.pop_front();
    TERSE_CHECK(transfers.wait(slot));

    const int block = ring.reduce_scatter_recv_block(step);
    const uint8_t* mine = own(block, range.offset);
    if (step + 1 < ring.steps()) {
      // Add this rank's contribution and pass the partial sum on as the next step's message.
      if (scaled) {
        prepare_contribution(args.type, args.op, scaled_piece, mine, range.count);
        mine = scaled_piece;
      }
      reduce_into(args.type, args.op.kind, slot_data(slot), mine, range.count);
      forwarding_slots.push_back(slot);
      TERSE_CHECK(transfers.send(kSlots + slot, ring.next(),
                                 make_operation(context.sequence, j + 1), slot_data(slot),
                                 range.count * element_bytes));
    } else {
      // The last step brings this rank's own block: finish it in the output. In place, the
      // output piece is this rank's contribution to it, read before it is overwritten.
      uint8_t* out = recv + range.offset * element_bytes;
      prepare_contribution(args.type, args.op, out, mine, range.count);
      reduce_into(args.type, args.op.kind, out, slot_data(slot), range.count);
      finish_result(args.type, args.op, out, range.count);
      free_slots.push_back(slot);
    }
  }
  return transfers.wait_all();
}

}  // namespace terse
