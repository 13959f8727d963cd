// Compressed ring: a ring reduce-scatter whose partial sums travel encoded, decoded, added to
// and re-encoded at every hop, then a ring allgather that forwards the owners' encoded blocks
// unchanged (ring_pattern.h has the block arithmetic; rank r below is group position r).
//
//   reduce-scatter step 0:  rank r encodes its own block r-1 (encode_contribution) and sends it;
//   step s (0 <= s < n-1):  it receives the partial sum of block r-s-2, decodes it, adds its own
//                           values exactly, re-encodes (encode_partial) and sends it on at step
//                           s+1; at the last step the block is r, complete: its owner encodes
//                           the total once, sends it round and decodes its own message;
//   allgather:              every rank decodes the encoded blocks it receives into the result
//                           and forwards them unchanged (but not back to their owner).
// A block's partial sum is encoded n - 1 times around the ring and its total once: n lossy steps,
// so the error grows with the rank count (lossy_steps n). Every rank decodes the same final
// messages, so all hold the same bits.
//
// Error feedback (memory `residual`): rank r encodes each element exactly once per call, as its
// own value (block r-1) or inside a partial sum it re-encodes (every other block), and the
// residual keeps the error of that one encode: values - decode(message) for its own block,
// (partial sum + values) - decode(message) for the others. make_contribution adds it back next
// call, so the dropped part of every encode, not only the first, is sent later: summed over
// calls, the results differ from the inputs by the ranks' current residuals only (they do not
// pile up with the step count). The residual of a re-encoded block thus holds error of the
// partial sum, which includes other ranks' values; it is still this rank's to resend, as an SRA
// owner's residual is.
//
// Pipelining: every block is cut into pieces of context.piece_bytes of fp32; a unit is one
// piece of one step, handled in order (the reduce-scatter's steps, then the allgather's, pieces
// in order). Receives are posted kReceivesAhead units ahead, so the next pieces arrive while
// this one is decoded and re-encoded. Every message this rank sends has a buffer of its own
// (the allgather forwards from where it received), so sends are waited for only at the end.
//
// No deadlock: a rank blocks only on the receive of the unit it handles, whose message the
// previous rank sends once it has handled the unit a step earlier (units < pieces at once);
// following such waits around the ring the unit numbers strictly decrease, so they cannot close
// a cycle. A send whose receive is not posted yet waits in UCX, not in this rank's code.
//
// Memory: the codec work and the tensor-sized values (contribution, partial sums) go through the
// call's execution backend (execution_backend.h), so device buffers run them as kernels and only
// the encoded pieces cross to the host; a message is sent only once the backend has it in host
// memory (wait_messages). The reduce-scatter's receive buffers are reused, safely: a buffer is
// posted again only after the unit that decoded from it has encoded and waited for its message,
// which follows that decode in the backend's order.
#include <algorithm>
#include <cstring>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Units share the tag's 12-bit step field (tag_layout.h): at most this many per call.
constexpr size_t kMaxUnits = 4000;
// Receives posted beyond the one waited for.
constexpr size_t kReceivesAhead = 8;

class CompressedRing {
 public:
  CompressedRing(const CompressedArgs& args, const CompressedContext& context)
      : args_(args),
        context_(context),
        backend_(backend_of(context)),
        ring_(context.group.index, context.group.size()),
        next_(context.group.rank_at(ring_.next())),
        previous_(context.group.rank_at(ring_.previous())),
        largest_block_(ring_.block(args.count, 0).count),
        piece_(piece_elements(context.piece_bytes, largest_block_, ring_.steps())),
        pieces_(pipeline_piece_count(largest_block_, piece_)),
        phase_units_(static_cast<size_t>(ring_.steps()) * pieces_),
        units_(2 * phase_units_),
        receive_slots_(std::min(kReceivesAhead, units_)),
        capacity_(message_capacity(args, std::min(piece_, largest_block_))),
        transfers_(context.transport, 2 * units_, context.deadline,
                   context.scratch->transfer_slots()) {}

  // The steps, then the backend's finish whatever they returned (device work they enqueued may
  // still read the call's buffers).
  ncclResult_t run() {
    const ncclResult_t result = run_steps();
    const ncclResult_t finished = backend_.finish();
    return result != ncclSuccess ? result : finished;
  }

 private:
  ncclResult_t run_steps() {
    TERSE_CHECK(lay_out());
    TERSE_CHECK(post_receives(0));
    // Step 0 of the reduce-scatter: this rank's own block, with its residual, compensated piece
    // by piece so that the first piece leaves at once.
    const ElementRange first = ring_.block(args_.count, ring_.reduce_scatter_send_block(0));
    for (size_t k = 0; k < pieces_; ++k) {
      const ElementRange range = piece(ring_.reduce_scatter_send_block(0), k);
      size_t bytes = 0;
      TERSE_CHECK(backend_.encode_contribution(args_, context_, values_, range, sent(k), capacity_,
                                               &bytes));
      TERSE_CHECK(backend_.wait_messages());
      TERSE_CHECK(send(k, sent(k), bytes));
      context_.transport->progress();
    }
    // The other blocks' contribution, added to the partial sums below: compensated before any
    // re-encode writes their residual ranges.
    TERSE_CHECK(
        backend_.make_contribution(args_, context_, values_, ElementRange{0, first.offset}));
    const size_t after = first.offset + first.count;
    TERSE_CHECK(backend_.make_contribution(args_, context_, values_,
                                           ElementRange{after, args_.count - after}));
    for (size_t unit = 0; unit < units_; ++unit) {
      TERSE_CHECK(post_receives(unit));
      TERSE_CHECK(transfers_.wait(recv_slot(unit)));
      const size_t bytes = transfers_.received_bytes(recv_slot(unit));
      if (unit < phase_units_) {
        TERSE_CHECK(reduce(unit, bytes));
      } else {
        TERSE_CHECK(gather(unit, bytes));
      }
      context_.transport->progress();
    }
    return transfers_.wait_all();
  }

  // Elements per piece: context.piece_bytes worth, larger when the units would not fit the tag.
  static size_t piece_elements(size_t piece_bytes, size_t largest_block, int steps) {
    const size_t requested = std::max<size_t>(1, piece_bytes / sizeof(float));
    const size_t most_pieces = std::max<size_t>(1, kMaxUnits / (2 * static_cast<size_t>(steps)));
    return std::max(requested, (largest_block + most_pieces - 1) / most_pieces);
  }

  size_t step_of(size_t unit) const { return (unit % phase_units_) / pieces_; }
  size_t piece_of(size_t unit) const { return unit % pieces_; }
  bool last_step(size_t unit) const {
    return step_of(unit) + 1 == static_cast<size_t>(ring_.steps());
  }
  uint32_t operation(size_t unit) const {
    return make_operation(context_.sequence, context_.first_step + static_cast<uint32_t>(unit));
  }
  ElementRange piece(int block, size_t k) const {
    return pipeline_piece(ring_.block(args_.count, block), piece_, k);
  }
  // Transfer slots: the send of unit u in u, its receive in units_ + u.
  size_t recv_slot(size_t unit) const { return units_ + unit; }

  // Where unit u's message arrives: reduce-scatter pieces in receive_slots_ buffers in turn
  // (consumed when handled), allgather pieces each in its own (forwarded from there).
  uint8_t* received(size_t unit) const {
    if (unit < phase_units_) return reduce_received_ + (unit % receive_slots_) * capacity_;
    return gathered_ + (unit - phase_units_) * capacity_;
  }
  // The reduce-scatter messages this rank encodes: unit u's at u, its owned block's pieces after.
  uint8_t* sent(size_t unit) const { return sent_ + unit * capacity_; }
  uint8_t* owned(size_t k) const { return sent_ + (phase_units_ + k) * capacity_; }

  // Null from the backend: an allocation failed (its error is this thread's last).
  ncclResult_t lay_out() {
    values_ = backend_.floats(context_, ScratchSlot::kValues, args_.count);
    reduce_received_ =
        backend_.message_buffer(context_, ScratchSlot::kIncoming, receive_slots_ * capacity_);
    gathered_ =
        backend_.message_buffer(context_, ScratchSlot::kSecondary, phase_units_ * capacity_);
    sent_ = backend_.message_buffer(context_, ScratchSlot::kOutgoing,
                                    (phase_units_ + pieces_) * capacity_);
    const size_t largest_piece = std::min(piece_, largest_block_);
    partial_ = backend_.floats(context_, ScratchSlot::kAccumulator, largest_piece);
    decoded_ = backend_.floats(context_, ScratchSlot::kTertiary, largest_piece);
    const bool laid_out = values_ != nullptr && reduce_received_ != nullptr &&
                          gathered_ != nullptr && sent_ != nullptr && partial_ != nullptr &&
                          decoded_ != nullptr;
    return laid_out ? ncclSuccess : ncclSystemError;
  }

  // Posts receives up to kReceivesAhead units past `unit` (units before it are handled, so the
  // reduce-scatter buffer a new receive reuses is free).
  ncclResult_t post_receives(size_t unit) {
    for (; next_recv_ < units_ && next_recv_ < unit + receive_slots_; ++next_recv_) {
      TERSE_CHECK(transfers_.recv_up_to(recv_slot(next_recv_), previous_, operation(next_recv_),
                                        received(next_recv_), capacity_));
    }
    return ncclSuccess;
  }

  ncclResult_t send(size_t unit, const void* message, size_t bytes) {
    TERSE_CHECK(transfers_.send(unit, next_, operation(unit), message, bytes));
    count_sent(context_, bytes);
    return ncclSuccess;
  }

  // A reduce-scatter unit: the received partial sum plus this rank's values, re-encoded for the
  // next rank, or (last step) the block's total, encoded once by its owner; the error of the
  // encode becomes this range's residual.
  ncclResult_t reduce(size_t unit, size_t bytes) {
    const size_t k = piece_of(unit);
    const int step = static_cast<int>(step_of(unit));
    const ElementRange range = piece(ring_.reduce_scatter_recv_block(step), k);
    TERSE_CHECK(
        backend_.decode(args_, context_, received(unit), bytes, partial_, range.count, false));
    TERSE_CHECK(backend_.add(partial_, values_ + range.offset, range.count));
    float* residual = call_residual(args_);
    float* error = residual != nullptr ? residual + range.offset : nullptr;
    const bool last = last_step(unit);
    uint8_t* message = last ? owned(k) : sent(unit + pieces_);
    size_t encoded = 0;
    TERSE_CHECK(backend_.encode_partial(args_, context_, partial_, range, error, message, capacity_,
                                        &encoded));
    TERSE_CHECK(backend_.wait_messages());
    if (!last) return send(unit + pieces_, message, encoded);
    // The owner's block: its total goes round the allgather; the owner decodes what others do.
    TERSE_CHECK(send(phase_units_ + k, message, encoded));
    return write_piece(message, encoded, range);
  }

  // An allgather unit: passed on unchanged (unless the next rank owns it), then decoded.
  ncclResult_t gather(size_t unit, size_t bytes) {
    const ElementRange range =
        piece(ring_.allgather_recv_block(static_cast<int>(step_of(unit))), piece_of(unit));
    if (!last_step(unit)) TERSE_CHECK(send(unit + pieces_, received(unit), bytes));
    return write_piece(received(unit), bytes, range);
  }

  ncclResult_t write_piece(const uint8_t* message, size_t bytes, const ElementRange& range) {
    // An fp32 result without scaling is decoded in place; anything else goes through fp32.
    if (args_.dtype == DType::kFloat32 && args_.result_scale == 1.0) {
      return backend_.decode(args_, context_, message, bytes,
                             static_cast<float*>(args_.recv) + range.offset, range.count, false);
    }
    TERSE_CHECK(backend_.decode(args_, context_, message, bytes, decoded_, range.count, false));
    return backend_.write_result(args_, decoded_, range);
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  ExecutionBackend& backend_;
  const RingPattern ring_;
  const int next_;      // transport rank of the next position
  const int previous_;  // and of the previous one
  const size_t largest_block_;
  const size_t piece_;        // elements per piece
  const size_t pieces_;       // per block, the same for every block (the last may be empty)
  const size_t phase_units_;  // units of the reduce-scatter, and of the allgather
  const size_t units_;
  const size_t receive_slots_;  // reduce-scatter receive buffers
  const size_t capacity_;       // bytes of one piece's message at most
  size_t next_recv_ = 0;
  float* values_ = nullptr;
  uint8_t* reduce_received_ = nullptr;
  uint8_t* gathered_ = nullptr;
  uint8_t* sent_ = nullptr;
  float* partial_ = nullptr;
  float* decoded_ = nullptr;
  // Last: cancelled (in its destructor) before anything above goes away.
  InFlightTransfers transfers_;
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
