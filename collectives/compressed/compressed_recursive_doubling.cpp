// Compressed recursive doubling: log2(p) rounds of whole-buffer encoded exchanges (p the largest
// power of two <= n), each with the partner at position ^ 2^k. Whole-buffer messages keep the
// codec's blocks full and the message count low: the choice for mid-size tensors.
//
//   fold:   ranks at positions p + i (i < n - p) send their encoded contribution to position i,
//           which adds the decode of its own encoded contribution and of that message;
//   rounds: every rank encodes its running value (round 0 on ranks without a fold: its own
//           contribution, with its residual), exchanges with its partner, and the new running
//           value is decode(message of the lower position) + decode(message of the higher), in
//           that order, its own message decoded like the partner's. Encoding is deterministic
//           (the seed is the call's, the same on every rank), so the ranks that held equal values
//           send equal messages and, round by round, every rank ends with the same bits;
//   unfold: with a fold, the result is encoded once more, sent to the folded ranks, and every
//           rank decodes that message, so the folded ranks hold the same bits too.
// Lossy steps: log2 n for a power of two; log2 p + 2 otherwise (own encode, p rounds, unfold).
//
// Steps: 0 fold, 1 .. log2 p the rounds, log2 p + 1 unfold.
#include <cstring>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

class CompressedRecursiveDoubling {
 public:
  CompressedRecursiveDoubling(const CompressedArgs& args, const CompressedContext& context)
      : args_(args), context_(context), n_(context.group.size()), me_(context.group.index) {
    while (p_ * 2 <= n_) p_ *= 2;
    while ((1 << rounds_) < p_) ++rounds_;
    capacity_ = message_capacity(args, args.count);
  }

  ncclResult_t run() {
    CompressionScratch& scratch = *context_.scratch;
    values_ = scratch.floats(ScratchSlot::kValues, args_.count);
    running_ = scratch.floats(ScratchSlot::kAccumulator, args_.count);
    outgoing_ = scratch.bytes(ScratchSlot::kOutgoing, capacity_);
    incoming_ = scratch.bytes(ScratchSlot::kIncoming, capacity_);
    TERSE_CHECK(make_contribution(args_, context_, values_));
    const int extra = n_ - p_;
    if (me_ >= p_) return run_folded(me_ - p_);
    bool own_encoded = false;
    if (me_ < extra) {
      // Fold: own encoded contribution (lower position) plus the folded rank's.
      size_t own_bytes = 0;
      TERSE_CHECK(
          encode_contribution(args_, context_, values_, whole(), outgoing_, capacity_, &own_bytes));
      size_t bytes = 0;
      TERSE_CHECK(exchange(p_ + me_, 0, nullptr, 0, &bytes));
      TERSE_CHECK(
          decode_message(args_, context_, outgoing_, own_bytes, running_, args_.count, false));
      TERSE_CHECK(decode_message(args_, context_, incoming_, bytes, running_, args_.count, true));
    } else {
      own_encoded = true;  // round 0 encodes the contribution itself
    }
    for (int round = 0; round < rounds_; ++round) {
      const int partner = me_ ^ (1 << round);
      size_t own_bytes = 0;
      if (round == 0 && own_encoded) {
        TERSE_CHECK(encode_contribution(args_, context_, values_, whole(), outgoing_, capacity_,
                                        &own_bytes));
      } else {
        TERSE_CHECK(encode_partial(args_, context_, running_, args_.count, nullptr, outgoing_,
                                   capacity_, &own_bytes));
      }
      size_t bytes = 0;
      TERSE_CHECK(
          exchange(partner, static_cast<uint32_t>(1 + round), outgoing_, own_bytes, &bytes));
      const bool lower = me_ < partner;
      TERSE_CHECK(decode_message(args_, context_, lower ? outgoing_ : incoming_,
                                 lower ? own_bytes : bytes, running_, args_.count, false));
      TERSE_CHECK(decode_message(args_, context_, lower ? incoming_ : outgoing_,
                                 lower ? bytes : own_bytes, running_, args_.count, true));
    }
    if (extra > 0) {
      // Unfold: everyone decodes the same encoded result.
      size_t bytes = 0;
      TERSE_CHECK(encode_partial(args_, context_, running_, args_.count, nullptr, outgoing_,
                                 capacity_, &bytes));
      if (me_ < extra) {
        InFlightTransfers transfers(context_.transport, 1, context_.deadline);
        TERSE_CHECK(transfers.send(0, context_.group.rank_at(p_ + me_), operation(unfold_step()),
                                   outgoing_, bytes));
        count_sent(context_, bytes);
        TERSE_CHECK(transfers.wait_all());
      }
      TERSE_CHECK(decode_message(args_, context_, outgoing_, bytes, running_, args_.count, false));
    }
    write_result(args_, running_, whole());
    return ncclSuccess;
  }

 private:
  ElementRange whole() const { return ElementRange{0, args_.count}; }
  uint32_t unfold_step() const { return static_cast<uint32_t>(1 + rounds_); }
  uint32_t operation(uint32_t step) const {
    return make_operation(context_.sequence, context_.first_step + step);
  }

  // Sends `bytes` of `message` (none when null) to `position` and receives its message into
  // incoming_, at `step`.
  ncclResult_t exchange(int position, uint32_t step, const void* message, size_t bytes,
                        size_t* received) {
    InFlightTransfers transfers(context_.transport, 2, context_.deadline);
    const int peer = context_.group.rank_at(position);
    TERSE_CHECK(transfers.recv_up_to(1, peer, operation(step), incoming_, capacity_));
    if (message != nullptr) {
      TERSE_CHECK(transfers.send(0, peer, operation(step), message, bytes));
      count_sent(context_, bytes);
    }
    TERSE_CHECK(transfers.wait(1));
    *received = transfers.received_bytes(1);
    return transfers.wait_all();
  }

  // A rank beyond the power of two: its encoded contribution goes to position i, the encoded
  // result comes back.
  ncclResult_t run_folded(int i) {
    size_t bytes = 0;
    TERSE_CHECK(
        encode_contribution(args_, context_, values_, whole(), outgoing_, capacity_, &bytes));
    InFlightTransfers transfers(context_.transport, 2, context_.deadline);
    const int peer = context_.group.rank_at(i);
    TERSE_CHECK(transfers.recv_up_to(1, peer, operation(unfold_step()), incoming_, capacity_));
    TERSE_CHECK(transfers.send(0, peer, operation(0), outgoing_, bytes));
    count_sent(context_, bytes);
    TERSE_CHECK(transfers.wait(1));
    TERSE_CHECK(decode_message(args_, context_, incoming_, transfers.received_bytes(1), running_,
                               args_.count, false));
    write_result(args_, running_, whole());
    return transfers.wait_all();
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  const int n_;
  const int me_;
  int p_ = 1;
  int rounds_ = 0;
  size_t capacity_ = 0;
  float* values_ = nullptr;
  float* running_ = nullptr;
  uint8_t* outgoing_ = nullptr;
  uint8_t* incoming_ = nullptr;
};

}  // namespace

ncclResult_t compressed_recursive_doubling_allreduce(const CompressedArgs& args,
                                                     const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  CompressedRecursiveDoubling doubling(args, context);
  return doubling.run();
}

}  // namespace terse
