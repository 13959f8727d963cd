// Scatter-reduce-allgather (SRA): the compressed allreduce for quantizers on large tensors.
//
//   1. every rank adds its residual to its gradient (make_contribution_range, piece by piece
//      just before each piece's encode) and encodes the tensor
//      once, chunk j (near_equal_block) for its owner, group position j; each encode writes the
//      residual of its range (encode_contribution), and each message goes out as soon as it is
//      encoded, so encoding the next ones overlaps the sends of the first;
//   2. the owner of a chunk decodes the n encoded versions of it, its own included (decoded
//      like everyone else's), and sums them in position order in fp32;
//   3. the owner adds a residual of its own (the entry's stage residual, stage_residual(): what
//      its last re-encode of the chunk dropped) to the sum, re-encodes it, keeping the new error
//      as that residual (error feedback for the second lossy step too), and sends it to every
//      rank;
//   4. every rank, the owner included, decodes every owner's message into the result, so all
//      ranks hold the same bits (and, summing in position order, the same bits on every run).
// Each element passes through exactly two encodes whatever the rank count (lossy_steps 2): its
// rank's encode and its owner's re-encode. With memory `residual` both keep their error, so
// summed over calls the results differ from the inputs by the current residuals only. Each rank
// sends (n-1)/n of the encoded tensor in step 1 and (n-1) copies of its 1/n in step 3: 2(n-1)/n of
// the encoded tensor, as a dense ring sends of the raw one.
//
// Pipelining: every chunk is cut into the same number of pieces of context.piece_bytes of fp32
// (pieces grow when a chunk would need more than kMaxPiecesPerChunk). Piece k of every chunk is
// encoded and sent before piece k+1; between pieces, and whenever this rank waits, it sums the
// versions of its own pieces that have arrived, re-encodes and sends each finished sum, and
// decodes the owners' messages that have arrived. So the link carries piece k while piece k+1 is
// encoded, and summing and decoding overlap the transfers.
//
// No deadlock: every receive (step 1's for this rank's chunk first, then step 3's) is posted
// before anything is sent, so a send completes as soon as its receiver progresses, and every
// wait progresses; waiting for one of its own sends (kSendsInFlight sends old) therefore never
// blocks a rank for good. Step-1 messages are sent without waiting for any message, and a step-3
// message needs only step-1 messages, so every message a rank waits for does get sent.
//
// Tags: step k carries piece k of step 1, step pieces + k piece k of step 3 (< 4096: the tag's
// step field, tag_layout.h); the source rank tells senders apart.
//
// Memory: the codec work goes through the call's execution backend (execution_backend.h), so
// device buffers run it as kernels on their stream and only the encoded pieces cross to the
// host; messages are sent only once the backend has them in host memory (wait_messages).
#include <algorithm>
#include <array>

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

// At most this many pieces per chunk (pieces grow beyond context.piece_bytes when needed): more
// would not pipeline better, and every piece costs 2 (n-1) receives posted at the start.
constexpr size_t kMaxPiecesPerChunk = 64;
// Sends in flight at most: the oldest is waited for before another is posted. Enough encoded
// pieces to keep a link busy while this rank sums and decodes.
constexpr size_t kSendsInFlight = 32;

class ScatterReduceAllgather {
 public:
  ScatterReduceAllgather(const CompressedArgs& args, const CompressedContext& context)
      : args_(args),
        context_(context),
        backend_(backend_of(context)),
        n_(context.group.size()),
        me_(context.group.index),
        largest_chunk_(chunk(0).count),
        piece_(piece_elements(context.piece_bytes, largest_chunk_)),
        pieces_(pipeline_piece_count(largest_chunk_, piece_)),
        capacity_(message_capacity(args, std::min(piece_, largest_chunk_))),
        transfers_(context.transport, kSendsInFlight + 2 * p(n_) * pieces_, context.deadline,
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
    TERSE_CHECK(stage_residual(args_, chunk(me_).count, &owner_residual_));
    TERSE_CHECK(post_receives());
    for (size_t k = 0; k < pieces_; ++k) {
      TERSE_CHECK(scatter_piece(k));
      context_.transport->progress();
      TERSE_CHECK(advance(false));
    }
    TERSE_CHECK(advance(true));
    return transfers_.wait_all();
  }

  static size_t piece_elements(size_t piece_bytes, size_t largest_chunk) {
    const size_t requested = std::max<size_t>(1, piece_bytes / sizeof(float));
    const size_t fewest = (largest_chunk + kMaxPiecesPerChunk - 1) / kMaxPiecesPerChunk;
    return std::max(requested, fewest);
  }
  static size_t p(int position) { return static_cast<size_t>(position); }

  ElementRange chunk(int position) const { return near_equal_block(args_.count, n_, position); }
  ElementRange piece(int position, size_t k) const {
    return pipeline_piece(chunk(position), piece_, k);
  }
  int peer(int position) const { return context_.group.rank_at(position); }
  uint32_t operation(size_t step) const {
    return make_operation(context_.sequence, context_.first_step + static_cast<uint32_t>(step));
  }
  size_t scatter_step(size_t k) const { return k; }
  size_t gather_step(size_t k) const { return pieces_ + k; }

  // Transfer slots: kSendsInFlight sends in turn, then the receives of step 1 (versions of this
  // rank's pieces) and of step 3 (owners' messages), by sender position and piece.
  size_t scatter_recv_slot(int position, size_t k) const {
    return kSendsInFlight + p(position) * pieces_ + k;
  }
  size_t gather_recv_slot(int position, size_t k) const {
    return kSendsInFlight + (p(n_) + p(position)) * pieces_ + k;
  }

  // Messages, by position and piece: this rank's encoded pieces (position = owner), the versions
  // of its own pieces from every position, the owners' encoded sums (its own sent from there).
  uint8_t* outgoing(int position, size_t k) const { return at(outgoing_, position, k); }
  uint8_t* incoming(int position, size_t k) const { return at(incoming_, position, k); }
  uint8_t* gathered(int position, size_t k) const { return at(gathered_, position, k); }
  uint8_t* at(uint8_t* base, int position, size_t k) const {
    return base + (p(position) * pieces_ + k) * capacity_;
  }

  // Null from the backend: an allocation failed (its error is this thread's last).
  ncclResult_t lay_out() {
    const size_t messages = p(n_) * pieces_ * capacity_;
    values_ = backend_.floats(context_, ScratchSlot::kValues, args_.count);
    outgoing_ = backend_.message_buffer(context_, ScratchSlot::kOutgoing, messages);
    incoming_ = backend_.message_buffer(context_, ScratchSlot::kIncoming, messages);
    gathered_ = backend_.message_buffer(context_, ScratchSlot::kSecondary, messages);
    const size_t largest_piece = std::min(piece_, largest_chunk_);
    sum_ = backend_.floats(context_, ScratchSlot::kAccumulator, largest_piece);
    decoded_ = backend_.floats(context_, ScratchSlot::kTertiary, largest_piece);
    const bool laid_out = values_ != nullptr && outgoing_ != nullptr && incoming_ != nullptr &&
                          gathered_ != nullptr && sum_ != nullptr && decoded_ != nullptr;
    return laid_out ? ncclSuccess : ncclSystemError;
  }

  // This rank's chunk's versions first (they gate its re-encodes), then the owners' messages.
  ncclResult_t post_receives() {
    for (size_t k = 0; k < pieces_; ++k) {
      for (int j = 0; j < n_; ++j) {
        if (j == me_) continue;
        TERSE_CHECK(transfers_.recv_up_to(scatter_recv_slot(j, k), peer(j),
                                          operation(scatter_step(k)), incoming(j, k), capacity_));
      }
    }
    for (size_t k = 0; k < pieces_; ++k) {
      for (int j = 0; j < n_; ++j) {
        if (j == me_) continue;
        TERSE_CHECK(transfers_.recv_up_to(gather_recv_slot(j, k), peer(j),
                                          operation(gather_step(k)), gathered(j, k), capacity_));
      }
    }
    return ncclSuccess;
  }

  // Posts a send once the send kSendsInFlight sends ago (in the same slot) has finished.
  ncclResult_t post_send(int position, size_t step, const uint8_t* message, size_t bytes) {
    const size_t slot = sends_posted_ % kSendsInFlight;
    TERSE_CHECK(transfers_.wait(slot));
    TERSE_CHECK(transfers_.send(slot, peer(position), operation(step), message, bytes));
    count_sent(context_, bytes);
    ++sends_posted_;
    return ncclSuccess;
  }

  // Step 1 for piece k: encodes it for every owner, the next positions first (so that the ranks
  // do not all start with the same owner), its own last, sending each at once.
  ncclResult_t scatter_piece(size_t k) {
    for (int t = 1; t <= n_; ++t) {
      const int j = (me_ + t) % n_;
      size_t bytes = 0;
      // Compensated here, piece by piece, so the first piece leaves at once.
      TERSE_CHECK(backend_.encode_contribution(args_, context_, values_, piece(j, k),
                                               outgoing(j, k), capacity_, &bytes));
      TERSE_CHECK(backend_.wait_messages());
      if (j == me_) {
        own_version_bytes_[k] = bytes;
      } else {
        TERSE_CHECK(post_send(j, scatter_step(k), outgoing(j, k), bytes));
      }
    }
    scattered_pieces_ = k + 1;
    return ncclSuccess;
  }

  bool finished() const { return reduced_pieces_ == pieces_ && next_gathered_ == p(n_) * pieces_; }

  // Does whatever the messages that have arrived allow (steps 2 to 4), then, with `block`, waits
  // for the next message needed and goes on until the call is done.
  ncclResult_t advance(bool block) {
    for (;;) {
      bool progressed = false;
      TERSE_CHECK(reduce_arrived(&progressed));
      TERSE_CHECK(decode_arrived(&progressed));
      if (progressed) continue;
      if (!block || finished()) return ncclSuccess;
      // All pieces are scattered by now; own versions never wait, so the next one is a peer's.
      const size_t slot = reduced_pieces_ < pieces_
                              ? scatter_recv_slot(reduce_position_, reduced_pieces_)
                              : gather_recv_slot(gathered_position(), gathered_piece());
      TERSE_CHECK(transfers_.wait(slot));
    }
  }

  // Step 2: adds the versions of this rank's pieces in position order, as far as they have
  // arrived (only scattered pieces: its own version must exist); step 3 for each completed sum.
  ncclResult_t reduce_arrived(bool* progressed) {
    while (reduced_pieces_ < scattered_pieces_) {
      const size_t k = reduced_pieces_;
      const size_t count = piece(me_, k).count;
      for (; reduce_position_ < n_; ++reduce_position_) {
        const int j = reduce_position_;
        const uint8_t* message = outgoing(me_, k);
        size_t bytes = own_version_bytes_[k];
        if (j != me_) {
          const size_t slot = scatter_recv_slot(j, k);
          if (!transfers_.finished(slot)) return ncclSuccess;
          TERSE_CHECK(transfers_.wait(slot));  // its outcome
          message = incoming(j, k);
          bytes = transfers_.received_bytes(slot);
        }
        TERSE_CHECK(backend_.decode(args_, context_, message, bytes, sum_, count, j > 0));
        *progressed = true;
      }
      TERSE_CHECK(send_sum(k));
      ++reduced_pieces_;
      reduce_position_ = 0;
    }
    return ncclSuccess;
  }

  // Step 3 for piece k: the sum plus the owner's residual (what its last re-encode of these
  // elements dropped) re-encoded, the error becoming the new residual; sent to every other
  // position (the next ones first), and decoded here like everywhere else.
  ncclResult_t send_sum(size_t k) {
    const ElementRange range = piece(me_, k);
    float* error = nullptr;
    if (owner_residual_ != nullptr) {
      error = owner_residual_ + (range.offset - chunk(me_).offset);
      TERSE_CHECK(backend_.add(sum_, error, range.count));
    }
    size_t bytes = 0;
    TERSE_CHECK(backend_.encode_partial(args_, context_, sum_, range, error, gathered(me_, k),
                                        capacity_, &bytes));
    TERSE_CHECK(backend_.wait_messages());
    for (int t = 1; t < n_; ++t) {
      TERSE_CHECK(post_send((me_ + t) % n_, gather_step(k), gathered(me_, k), bytes));
    }
    return decode_into_result(gathered(me_, k), bytes, range);
  }

  // Step 4: the owners' messages that have arrived, in piece and position order (each lands in
  // its own range of the result, so the order only decides when, not what).
  size_t gathered_piece() const { return next_gathered_ / p(n_); }
  int gathered_position() const { return static_cast<int>(next_gathered_ % p(n_)); }
  ncclResult_t decode_arrived(bool* progressed) {
    for (; next_gathered_ < p(n_) * pieces_; ++next_gathered_) {
      const int j = gathered_position();
      const size_t k = gathered_piece();
      if (j == me_) continue;  // decoded when it was sent
      const size_t slot = gather_recv_slot(j, k);
      if (!transfers_.finished(slot)) return ncclSuccess;
      TERSE_CHECK(transfers_.wait(slot));
      TERSE_CHECK(decode_into_result(gathered(j, k), transfers_.received_bytes(slot), piece(j, k)));
      *progressed = true;
    }
    return ncclSuccess;
  }

  ncclResult_t decode_into_result(const uint8_t* message, size_t bytes, const ElementRange& range) {
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
  const int n_;
  const int me_;
  const size_t largest_chunk_;       // chunk 0's elements
  const size_t piece_;               // elements per piece
  const size_t pieces_;              // per chunk, the same for every chunk (the last may be empty)
  const size_t capacity_;            // bytes of one piece's message at most
  float* owner_residual_ = nullptr;  // of this rank's chunk (the entry's stage residual)
  std::array<size_t, kMaxPiecesPerChunk> own_version_bytes_{};
  size_t scattered_pieces_ = 0;
  size_t reduced_pieces_ = 0;
  int reduce_position_ = 0;   // next version to add to the sum of piece reduced_pieces_
  size_t next_gathered_ = 0;  // next owner message to decode: piece * n + position
  size_t sends_posted_ = 0;
  float* values_ = nullptr;
  uint8_t* outgoing_ = nullptr;
  uint8_t* incoming_ = nullptr;
  uint8_t* gathered_ = nullptr;
  float* sum_ = nullptr;
  float* decoded_ = nullptr;
  // Last: cancelled (in its destructor) before anything above goes away.
  InFlightTransfers transfers_;
};

}  // namespace

size_t sra_stage_residual_elements(const CompressedAlgorithmInfo*, const Codec&, size_t count,
                                   DType, const PeerGroup& group) {
  if (group.size() <= 1) return 0;
  return near_equal_block(count, group.size(), 0).count;  // chunk 0 is a largest one
}

ncclResult_t compressed_sra_allreduce(const CompressedArgs& args,
                                      const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  ScatterReduceAllgather sra(args, context);
  return sra.run();
}

}  // namespace terse
