// Compressed ring: a ring reduce-scatter whose partial sums travel encoded, decoded, added to
// and re-encoded at every hop, then a ring allgather that forwards the owners' encoded blocks
// unchanged (ring_pattern.h has the block arithmetic).
//
//   reduce-scatter step 0: rank r encodes its own block r-1 (with its residual: encode_
//                          contribution writes the residual of that range) and sends it on;
//   step s > 0:            decode the partial sum of block r-s-2 from the previous rank, add
//                          this rank's contribution exactly, re-encode (no residual), send;
//   last step:             the received block r plus this rank's contribution is the sum of
//                          block r; the owner encodes it once and decodes its own message;
//   allgather:             every rank forwards the encoded blocks it receives and decodes them.
// A block's partial sum is encoded n - 1 times around the ring and its total once: n lossy
// steps, so the error grows with the rank count (lossy_steps n). Every rank decodes the same
// final messages, so all hold the same bits.
//
// This rank's own contribution goes into the partial sums exactly for every block but the one
// it encodes at step 0, so the residual of those blocks has been delivered: it is cleared.
//
// Pipelining: every block is cut into pieces of context.piece_bytes of fp32; a unit is one
// piece of one step, and units are handled in order (the reduce-scatter's steps, then the
// allgather's, pieces in order). Every receive is posted before the first unit, into a slot of
// its own, so a send always finds its receive and the next pieces arrive while this one is
// decoded and re-encoded. Sends are waited for at the end.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

// Units share the tag's 12-bit step field (tag_layout.h): at most this many per call.
constexpr size_t kMaxUnits = 4000;

class CompressedRing {
 public:
  CompressedRing(const CompressedArgs& args, const CompressedContext& context)
      : args_(args),
        context_(context),
        ring_(context.group.index, context.group.size()),
        next_(context.group.rank_at(ring_.next())),
        previous_(context.group.rank_at(ring_.previous())) {
    const size_t largest = ring_.block(args.count, 0).count;
    const size_t steps = static_cast<size_t>(2 * ring_.steps());
    piece_ = std::max<size_t>(1, context.piece_bytes / sizeof(float));
    // Fewer, larger pieces when the tag's step field would run out.
    const size_t most_pieces = std::max<size_t>(1, kMaxUnits / steps);
    piece_ = std::max(piece_, (largest + most_pieces - 1) / most_pieces);
    pieces_ = pipeline_piece_count(largest, piece_);
    phase_units_ = static_cast<size_t>(ring_.steps()) * pieces_;
    units_ = 2 * phase_units_;
    capacity_ = message_capacity(args, std::min(piece_, std::max<size_t>(largest, 1)));
  }

  ncclResult_t run() {
    CompressionScratch& scratch = *context_.scratch;
    values_ = scratch.floats(ScratchSlot::kValues, args_.count);
    received_ = scratch.bytes(ScratchSlot::kIncoming, units_ * capacity_);
    sent_ = scratch.bytes(ScratchSlot::kOutgoing, (phase_units_ + pieces_) * capacity_);
    partial_ = scratch.floats(ScratchSlot::kAccumulator, piece_);
    decoded_ = scratch.floats(ScratchSlot::kTertiary, piece_);
    TERSE_CHECK(make_contribution(args_, context_, values_));

    InFlightTransfers transfers(context_.transport, 2 * units_ + pieces_, context_.deadline);
    for (size_t unit = 0; unit < units_; ++unit) {
      TERSE_CHECK(transfers.recv_up_to(units_ + unit, previous_, operation(unit), received(unit),
                                       capacity_));
    }
    // Step 0 of the reduce-scatter: this rank's own block, with its residual.
    for (size_t k = 0; k < pieces_; ++k) {
      const ElementRange range = piece(ring_.reduce_scatter_send_block(0), k);
      size_t bytes = 0;
      TERSE_CHECK(encode_contribution(args_, context_, values_, range, sent(k), capacity_, &bytes));
      TERSE_CHECK(send(&transfers, k, sent(k), bytes));
    }
    clear_delivered_residual();
    for (size_t unit = 0; unit < units_; ++unit) {
      TERSE_CHECK(transfers.wait(units_ + unit));
      const size_t bytes = transfers.received_bytes(units_ + unit);
      if (unit < phase_units_) {
        TERSE_CHECK(reduce(&transfers, unit, bytes));
      } else {
        TERSE_CHECK(gather(&transfers, unit, bytes));
      }
    }
    return transfers.wait_all();
  }

 private:
  size_t step_of(size_t unit) const { return (unit % phase_units_) / pieces_; }
  size_t piece_of(size_t unit) const { return unit % pieces_; }
  uint32_t operation(size_t unit) const {
    return make_operation(context_.sequence, context_.first_step + static_cast<uint32_t>(unit));
  }
  ElementRange piece(int block, size_t k) const {
    return pipeline_piece(ring_.block(args_.count, block), piece_, k);
  }
  uint8_t* received(size_t unit) const { return received_ + unit * capacity_; }
  // Outgoing messages this rank encodes: reduce-scatter unit u at u, its owned block's pieces
  // after them.
  uint8_t* sent(size_t unit) const { return sent_ + unit * capacity_; }
  uint8_t* owned(size_t k) const { return sent_ + (phase_units_ + k) * capacity_; }

  ncclResult_t send(InFlightTransfers* transfers, size_t unit, const void* message, size_t bytes) {
    TERSE_CHECK(transfers->send(unit, next_, operation(unit), message, bytes));
    count_sent(context_, bytes);
    return ncclSuccess;
  }

  void clear_delivered_residual() {
    float* residual = args_.entry != nullptr ? args_.entry->residual() : nullptr;
    if (residual == nullptr) return;
    const ElementRange kept = ring_.block(args_.count, ring_.reduce_scatter_send_block(0));
    std::memset(residual, 0, kept.offset * sizeof(float));
    const size_t end = kept.offset + kept.count;
    std::memset(residual + end, 0, (args_.count - end) * sizeof(float));
  }

  // A reduce-scatter unit: the partial sum of the received piece plus this rank's values,
  // re-encoded for the next rank, or (last step) the block's total, encoded by its owner.
  ncclResult_t reduce(InFlightTransfers* transfers, size_t unit, size_t bytes) {
    const size_t step = step_of(unit), k = piece_of(unit);
    const ElementRange range = piece(ring_.reduce_scatter_recv_block(static_cast<int>(step)), k);
    TERSE_CHECK(
        decode_message(args_, context_, received(unit), bytes, partial_, range.count, false));
    const float* own = values_ + range.offset;
    for (size_t i = 0; i < range.count; ++i) partial_[i] += own[i];
    const bool last = step + 1 == static_cast<size_t>(ring_.steps());
    uint8_t* message = last ? owned(k) : sent(unit + pieces_);
    size_t encoded = 0;
    TERSE_CHECK(encode_partial(args_, context_, partial_, range.count, nullptr, message, capacity_,
                               &encoded));
    if (!last) return send(transfers, unit + pieces_, message, encoded);
    // The owner's block: its total goes round the allgather; the owner keeps what others decode.
    owned_bytes_.push_back(encoded);
    TERSE_CHECK(send(transfers, phase_units_ + k, message, encoded));
    return write_piece(message, encoded, range);
  }

  // An allgather unit: decode the received piece into the result and pass it on unchanged
  // (unless the next rank owns it).
  ncclResult_t gather(InFlightTransfers* transfers, size_t unit, size_t bytes) {
    const size_t step = step_of(unit), k = piece_of(unit);
    const ElementRange range = piece(ring_.allgather_recv_block(static_cast<int>(step)), k);
    if (step + 1 < static_cast<size_t>(ring_.steps())) {
      TERSE_CHECK(send(transfers, unit + pieces_, received(unit), bytes));
    }
    return write_piece(received(unit), bytes, range);
  }

  ncclResult_t write_piece(const uint8_t* message, size_t bytes, const ElementRange& range) {
    TERSE_CHECK(decode_message(args_, context_, message, bytes, decoded_, range.count, false));
    write_result(args_, decoded_, range);
    return ncclSuccess;
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  const RingPattern ring_;
  const int next_;
  const int previous_;
  size_t piece_ = 1;  // elements per piece
  size_t pieces_ = 1;
  size_t phase_units_ = 0;
  size_t units_ = 0;
  size_t capacity_ = 0;  // bytes of one piece's message
  float* values_ = nullptr;
  uint8_t* received_ = nullptr;
  uint8_t* sent_ = nullptr;
  float* partial_ = nullptr;
  float* decoded_ = nullptr;
  std::vector<size_t> owned_bytes_;
};

}  // namespace

ncclResult_t compressed_ring_allreduce(const CompressedArgs& args,
                                       const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  CompressedRing ring(args, context);
  return ring.run();
}

}  // namespace terse
