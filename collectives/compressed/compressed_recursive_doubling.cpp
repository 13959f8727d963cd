// Compressed recursive doubling: log2(p) rounds of whole-buffer encoded exchanges (p the largest
// power of two <= n), each with the partner at group position ^ 2^k. Whole-buffer messages keep
// the codec's blocks full and the message count low: the choice for mid-size tensors.
//
//   fold:   position p + i (i < n - p) sends its encoded contribution (with its residual) to
//           position i, which adds the decode to its own contribution, exactly: only encoded
//           messages ever leave position i, so its running value need not match anyone's;
//   rounds: every rank of the p encodes its running value (round 0: its contribution, through
//           encode_contribution so that its residual is written, or a fold host's sum with the
//           folded rank's), exchanges with its partner, and the new running value is
//           decode(message of the lower position) + decode(message of the higher), in that
//           order, its own message decoded like the partner's. Encoding is deterministic (the
//           seed is the call's, the same on every rank, and the codecs compute without FMA
//           contraction whether or not they return the error), so ranks holding equal values send
//           equal messages, and after round k every block of 2^(k+1) positions holds the same
//           bits: after the last round, all p;
//   unfold: with a fold, every rank of the p encodes the final value once more, the fold hosts
//           send that message to their folded rank, and every rank, folded or not, takes the
//           decode of that same message as its result.
// Lossy steps: log2 n for a power of two; otherwise log2 p + 2 (a folded contribution is encoded
// by its rank, in each of the log2 p rounds, and in the unfold).
//
// Error feedback (memory `residual`): every encode's error is kept by exactly one rank, so over
// calls the results differ from the inputs by the ranks' current residuals only (the errors
// telescope, as in the ring and sra). Round 0's error is each rank's own (the residual is
// rewritten: the old one went into the contribution, exactly); in round k >= 1 the running value
// of a block of 2^k positions is encoded identically by all of them, and its error goes to the
// block's position whose lowest set bit is 2^(k-1) (added to that rank's residual); the unfold's
// to position p/2 (lowest set bit 2^(log2 p - 1), the round after the last). Position 0 keeps
// its round-0 error only; every other rank keeps at most two.
//
// No deadlock: each exchange posts its receive before its send, and partners exchange at the
// same step; folded ranks send before they wait, and a host waits for its folded rank before
// round 0. Steps: 0 fold, 1 .. log2 p the rounds, log2 p + 1 unfold (at most 17 for 2^16 ranks,
// far below the tag's 4096).
//
// Memory: the codec work and the tensor-sized values (contribution, running value, kept error)
// go through the call's execution backend (execution_backend.h), so device buffers run them as
// kernels and only the encoded messages cross to the host; a message is sent only once the
// backend has it in host memory (wait_messages). The two message buffers are reused by every
// round, safely: a round's receive is posted, and its message encoded over the last one, only
// after the wait_messages of its own encode, which follows the previous round's decodes in the
// backend's order.
#include <cstddef>
#include <cstdint>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

class CompressedRecursiveDoubling {
 public:
  CompressedRecursiveDoubling(const CompressedArgs& args, const CompressedContext& context)
      : args_(args),
        context_(context),
        backend_(backend_of(context)),
        n_(context.group.size()),
        me_(context.group.index) {
    while (p_ * 2 <= n_) p_ *= 2;
    while ((1 << rounds_) < p_) ++rounds_;
    extra_ = n_ - p_;
    capacity_ = message_capacity(args, args.count);
    residual_ = call_residual(args);
  }

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
    if (me_ >= p_) return run_folded(me_ - p_);
    if (me_ < extra_) TERSE_CHECK(fold_in());
    for (int round = 0; round < rounds_; ++round) TERSE_CHECK(exchange_round(round));
    if (extra_ > 0) TERSE_CHECK(unfold());
    return backend_.write_result(args_, running_, whole());
  }

  // Null from the backend: an allocation failed (its error is this thread's last).
  ncclResult_t lay_out() {
    values_ = backend_.floats(context_, ScratchSlot::kValues, args_.count);
    running_ = backend_.floats(context_, ScratchSlot::kAccumulator, args_.count);
    outgoing_ = backend_.message_buffer(context_, ScratchSlot::kOutgoing, capacity_);
    incoming_ = backend_.message_buffer(context_, ScratchSlot::kIncoming, capacity_);
    const bool keeps_error = residual_ != nullptr && kept_stage() > 0;
    if (keeps_error) error_ = backend_.floats(context_, ScratchSlot::kSecondary, args_.count);
    const bool laid_out = values_ != nullptr && running_ != nullptr && outgoing_ != nullptr &&
                          incoming_ != nullptr && (!keeps_error || error_ != nullptr);
    return laid_out ? ncclSuccess : ncclSystemError;
  }

  ElementRange whole() const { return ElementRange{0, args_.count}; }
  uint32_t fold_step() const { return 0; }
  uint32_t round_step(int round) const { return static_cast<uint32_t>(1 + round); }
  uint32_t unfold_step() const { return static_cast<uint32_t>(1 + rounds_); }
  uint32_t operation(uint32_t step) const {
    return make_operation(context_.sequence, context_.first_step + step);
  }

  // The stage (round k >= 1, or rounds_ for the unfold) whose encode error this position keeps
  // besides its round-0 one: 1 + the index of its lowest set bit; 0 (none) for position 0, and
  // for position p/2 when there is no unfold.
  int kept_stage() const {
    if (me_ == 0 || me_ >= p_) return 0;
    int stage = 1;
    while (((me_ >> (stage - 1)) & 1) == 0) ++stage;
    return stage < rounds_ || extra_ > 0 ? stage : 0;
  }

  // residual += error_ (the error of the encode this rank keeps beyond round 0).
  ncclResult_t keep_error() { return backend_.add(residual_, error_, args_.count); }

  // Position i < n - p: values_ = its contribution + decode(folded rank p + i's encoded
  // contribution).
  ncclResult_t fold_in() {
    TERSE_CHECK(backend_.make_contribution(args_, context_, values_, whole()));
    InFlightTransfers transfers(context_.transport, 1, context_.deadline);
    TERSE_CHECK(transfers.recv_up_to(0, context_.group.rank_at(p_ + me_), operation(fold_step()),
                                     incoming_, capacity_));
    TERSE_CHECK(transfers.wait(0));
    return backend_.decode(args_, context_, incoming_, transfers.received_bytes(0), values_,
                           args_.count, true);
  }

  // Round `round`: encode the running value (round 0: values_), exchange with the partner,
  // running_ = decode(lower position's message) + decode(higher position's message).
  ncclResult_t exchange_round(int round) {
    const int partner = me_ ^ (1 << round);
    size_t own_bytes = 0;
    bool keep = false;
    if (round == 0 && me_ >= extra_) {
      TERSE_CHECK(backend_.encode_contribution(args_, context_, values_, whole(), outgoing_,
                                               capacity_, &own_bytes));
    } else if (round == 0) {
      // A fold host: its contribution went into values_ exactly, so the residual now holds this
      // encode's error alone.
      TERSE_CHECK(backend_.encode_partial(args_, context_, values_, whole(), residual_, outgoing_,
                                          capacity_, &own_bytes));
    } else {
      keep = error_ != nullptr && kept_stage() == round;
      TERSE_CHECK(backend_.encode_partial(args_, context_, running_, whole(),
                                          keep ? error_ : nullptr, outgoing_, capacity_,
                                          &own_bytes));
    }
    TERSE_CHECK(backend_.wait_messages());
    InFlightTransfers transfers(context_.transport, 2, context_.deadline);
    const int peer = context_.group.rank_at(partner);
    TERSE_CHECK(transfers.recv_up_to(1, peer, operation(round_step(round)), incoming_, capacity_));
    TERSE_CHECK(transfers.send(0, peer, operation(round_step(round)), outgoing_, own_bytes));
    count_sent(context_, own_bytes);
    // While the partner's message travels: what does not depend on it.
    if (keep) TERSE_CHECK(keep_error());
    const bool lower = me_ < partner;
    if (lower) {
      TERSE_CHECK(
          backend_.decode(args_, context_, outgoing_, own_bytes, running_, args_.count, false));
    }
    TERSE_CHECK(transfers.wait(1));
    const size_t partner_bytes = transfers.received_bytes(1);
    if (lower) {
      TERSE_CHECK(
          backend_.decode(args_, context_, incoming_, partner_bytes, running_, args_.count, true));
    } else {
      TERSE_CHECK(
          backend_.decode(args_, context_, incoming_, partner_bytes, running_, args_.count, false));
      TERSE_CHECK(
          backend_.decode(args_, context_, outgoing_, own_bytes, running_, args_.count, true));
    }
    // outgoing_ is reused by the next round.
    return transfers.wait_all();
  }

  // Every rank of the p encodes the (identical) final value; hosts send it to their folded
  // rank; everyone's result is its decode.
  ncclResult_t unfold() {
    const bool keep = error_ != nullptr && kept_stage() == rounds_;
    size_t bytes = 0;
    TERSE_CHECK(backend_.encode_partial(args_, context_, running_, whole(), keep ? error_ : nullptr,
                                        outgoing_, capacity_, &bytes));
    TERSE_CHECK(backend_.wait_messages());
    InFlightTransfers transfers(context_.transport, 1, context_.deadline);
    if (me_ < extra_) {
      TERSE_CHECK(transfers.send(0, context_.group.rank_at(p_ + me_), operation(unfold_step()),
                                 outgoing_, bytes));
      count_sent(context_, bytes);
    }
    if (keep) TERSE_CHECK(keep_error());
    TERSE_CHECK(backend_.decode(args_, context_, outgoing_, bytes, running_, args_.count, false));
    return transfers.wait_all();
  }

  // Position p + i: its encoded contribution goes to position i, the encoded result comes back.
  ncclResult_t run_folded(int i) {
    size_t bytes = 0;
    TERSE_CHECK(backend_.encode_contribution(args_, context_, values_, whole(), outgoing_,
                                             capacity_, &bytes));
    TERSE_CHECK(backend_.wait_messages());
    InFlightTransfers transfers(context_.transport, 2, context_.deadline);
    const int peer = context_.group.rank_at(i);
    TERSE_CHECK(transfers.recv_up_to(1, peer, operation(unfold_step()), incoming_, capacity_));
    TERSE_CHECK(transfers.send(0, peer, operation(fold_step()), outgoing_, bytes));
    count_sent(context_, bytes);
    TERSE_CHECK(transfers.wait(1));
    TERSE_CHECK(backend_.decode(args_, context_, incoming_, transfers.received_bytes(1), running_,
                                args_.count, false));
    TERSE_CHECK(backend_.write_result(args_, running_, whole()));
    return transfers.wait_all();
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  ExecutionBackend& backend_;
  const int n_;
  const int me_;
  int p_ = 1;
  int rounds_ = 0;
  int extra_ = 0;
  size_t capacity_ = 0;
  float* residual_ = nullptr;  // this rank's residual, or null without memory `residual`
  float* values_ = nullptr;    // contribution (a fold host: plus the folded rank's)
  float* running_ = nullptr;   // running value of rounds >= 1, then the result
  float* error_ = nullptr;     // the error of the encode kept beyond round 0
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
