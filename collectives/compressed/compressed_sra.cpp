// Scatter-reduce-allgather (SRA): the compressed allreduce for quantizers on large tensors.
//
//   1. every rank adds its residual to its gradient (make_contribution) and encodes the tensor
//      once, chunk by chunk, chunk j for its owner, group position j (the residual of each chunk
//      is written by its encode); each chunk goes out as soon as it is encoded, so encoding the
//      next chunks overlaps the sends of the first;
//   2. the owner of a chunk decodes the n encoded versions of it (its own included) as they
//      arrive and sums them in fp32;
//   3. the owner re-encodes the sum with a residual of its own (acquire_stage_entry
//      "sra-owner": error feedback for the second lossy step too) and sends the message to
//      every rank;
//   4. every rank, the owner included, decodes every chunk's message into the result, so all
//      ranks hold the same bits.
//
// Each element passes through exactly two encodes whatever the rank count (lossy_steps 2): its
// rank's chunk encode and its owner's re-encode. Each rank sends (n-1)/n of the tensor encoded in
// step 1 and (n-1) copies of its 1/n chunk in step 3: 2(n-1)/n of the encoded tensor, as a dense
// ring sends of the raw one.
//
// Messages: step 0 carries the scattered chunks, step 1 the owners' encoded sums; receives are
// all posted before any encode, so no rank ever waits on a message that has no receive.
#include <algorithm>
#include <memory>
#include <vector>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

constexpr uint32_t kScatterStep = 0;
constexpr uint32_t kGatherStep = 1;

class ScatterReduceAllgather {
 public:
  ScatterReduceAllgather(const CompressedArgs& args, const CompressedContext& context)
      : args_(args),
        context_(context),
        n_(context.group.size()),
        me_(context.group.index),
        transfers_(context.transport, 4 * static_cast<size_t>(context.group.size()),
                   context.deadline) {}

  ncclResult_t run() {
    lay_out();
    TERSE_CHECK(post_receives());
    TERSE_CHECK(make_contribution(args_, context_, values_));
    TERSE_CHECK(scatter());
    TERSE_CHECK(reduce_own_chunk());
    TERSE_CHECK(gather_and_decode());
    return transfers_.wait_all();
  }

 private:
  ElementRange chunk(int position) const { return near_equal_block(args_.count, n_, position); }
  uint32_t operation(uint32_t step) const {
    return make_operation(context_.sequence, context_.first_step + step);
  }
  int peer(int position) const { return context_.group.rank_at(position); }
  size_t p(int position) const { return static_cast<size_t>(position); }
  // Transfer slots: scatter sends, scatter receives, gather sends, gather receives.
  size_t scatter_send_slot(int position) const { return p(position); }
  size_t scatter_recv_slot(int position) const { return p(n_ + position); }
  size_t gather_send_slot(int position) const { return p(2 * n_ + position); }
  size_t gather_recv_slot(int position) const { return p(3 * n_ + position); }

  // Scratch: the contribution, the encoded chunks this rank sends (one per owner), the versions
  // of its own chunk it receives, the owners' encoded sums, and its chunk's sum.
  void lay_out() {
    CompressionScratch& scratch = *context_.scratch;
    values_ = scratch.floats(ScratchSlot::kValues, args_.count);
    capacity_.resize(p(n_));
    offset_.resize(p(n_));
    size_t total = 0;
    for (int j = 0; j < n_; ++j) {
      capacity_[p(j)] = message_capacity(args_, chunk(j).count);
      offset_[p(j)] = total;
      total += capacity_[p(j)];
    }
    outgoing_ = scratch.bytes(ScratchSlot::kOutgoing, total);
    gathered_ = scratch.bytes(ScratchSlot::kSecondary, total);
    incoming_ = scratch.bytes(ScratchSlot::kIncoming, p(n_) * capacity_[p(me_)]);
    sum_ = scratch.floats(ScratchSlot::kAccumulator, chunk(me_).count);
    decoded_ = scratch.floats(ScratchSlot::kTertiary, chunk(0).count);
    outgoing_bytes_.assign(p(n_), 0);
  }

  uint8_t* incoming(int position) { return incoming_ + p(position) * capacity_[p(me_)]; }

  ncclResult_t post_receives() {
    for (int j = 0; j < n_; ++j) {
      if (j == me_) continue;
      TERSE_CHECK(transfers_.recv_up_to(scatter_recv_slot(j), peer(j), operation(kScatterStep),
                                        incoming(j), capacity_[p(me_)]));
      TERSE_CHECK(transfers_.recv_up_to(gather_recv_slot(j), peer(j), operation(kGatherStep),
                                        gathered_ + offset_[p(j)], capacity_[p(j)]));
    }
    return ncclSuccess;
  }

  // Encodes every chunk, the next owners' first, sending each at once; its own chunk last.
  ncclResult_t scatter() {
    for (int k = 1; k <= n_; ++k) {
      const int j = (me_ + k) % n_;
      size_t bytes = 0;
      TERSE_CHECK(encode_contribution(args_, context_, values_, chunk(j), outgoing_ + offset_[p(j)],
                                      capacity_[p(j)], &bytes));
      outgoing_bytes_[p(j)] = bytes;
      if (j == me_) continue;
      TERSE_CHECK(transfers_.send(scatter_send_slot(j), peer(j), operation(kScatterStep),
                                  outgoing_ + offset_[p(j)], bytes));
      count_sent(context_, bytes);
    }
    return ncclSuccess;
  }

  // Decodes the versions of this rank's chunk in the order they arrive (only the owner sums a
  // chunk, so the order cannot make ranks differ), then re-encodes the sum and sends it.
  ncclResult_t reduce_own_chunk() {
    const size_t count = chunk(me_).count;
    TERSE_CHECK(decode_message(args_, context_, outgoing_ + offset_[p(me_)],
                               outgoing_bytes_[p(me_)], sum_, count, false));
    std::vector<bool> done(p(n_), false);
    done[p(me_)] = true;
    for (int left = n_ - 1; left > 0;) {
      int ready = -1;
      for (int j = 0; j < n_ && ready < 0; ++j) {
        if (!done[p(j)] && transfers_.finished(scatter_recv_slot(j))) ready = j;
      }
      if (ready < 0) {
        // Nothing has arrived: wait for the next in position order (others keep arriving).
        for (int j = 0; j < n_ && ready < 0; ++j) {
          if (!done[p(j)]) ready = j;
        }
      }
      TERSE_CHECK(transfers_.wait(scatter_recv_slot(ready)));
      TERSE_CHECK(decode_message(args_, context_, incoming(ready),
                                 transfers_.received_bytes(scatter_recv_slot(ready)), sum_, count,
                                 true));
      done[p(ready)] = true;
      --left;
    }
    std::shared_ptr<ResidualEntry> owner;
    TERSE_CHECK(acquire_stage_entry(args_, "sra-owner", count, &owner));
    float* error = owner != nullptr ? owner->residual() : nullptr;
    uint8_t* message = gathered_ + offset_[p(me_)];
    size_t bytes = 0;
    TERSE_CHECK(
        encode_partial(args_, context_, sum_, count, error, message, capacity_[p(me_)], &bytes));
    own_sum_bytes_ = bytes;
    for (int j = 0; j < n_; ++j) {
      if (j == me_) continue;
      TERSE_CHECK(
          transfers_.send(gather_send_slot(j), peer(j), operation(kGatherStep), message, bytes));
      count_sent(context_, bytes);
    }
    return ncclSuccess;
  }

  // Decodes every owner's message into the result, its own first (already here), then the
  // others in the order they arrive.
  ncclResult_t gather_and_decode() {
    TERSE_CHECK(decode_chunk(me_, own_sum_bytes_));
    std::vector<bool> done(p(n_), false);
    done[p(me_)] = true;
    for (int left = n_ - 1; left > 0; --left) {
      int ready = -1;
      for (int j = 0; j < n_ && ready < 0; ++j) {
        if (!done[p(j)] && transfers_.finished(gather_recv_slot(j))) ready = j;
      }
      for (int j = 0; j < n_ && ready < 0; ++j) {
        if (!done[p(j)]) ready = j;
      }
      TERSE_CHECK(transfers_.wait(gather_recv_slot(ready)));
      TERSE_CHECK(decode_chunk(ready, transfers_.received_bytes(gather_recv_slot(ready))));
      done[p(ready)] = true;
    }
    return ncclSuccess;
  }

  ncclResult_t decode_chunk(int position, size_t bytes) {
    const ElementRange range = chunk(position);
    const uint8_t* message = gathered_ + offset_[p(position)];
    // An fp32 result without scaling is decoded in place; anything else goes through fp32.
    if (args_.dtype == DType::kFloat32 && args_.result_scale == 1.0) {
      return decode_message(args_, context_, message, bytes,
                            static_cast<float*>(args_.recv) + range.offset, range.count, false);
    }
    TERSE_CHECK(decode_message(args_, context_, message, bytes, decoded_, range.count, false));
    write_result(args_, decoded_, range);
    return ncclSuccess;
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  const int n_;
  const int me_;
  std::vector<size_t> capacity_;  // by owner position: bound of its chunk's message
  std::vector<size_t> offset_;    // by owner position: where its message sits in outgoing_
  std::vector<size_t> outgoing_bytes_;
  size_t own_sum_bytes_ = 0;
  float* values_ = nullptr;
  uint8_t* outgoing_ = nullptr;
  uint8_t* gathered_ = nullptr;
  uint8_t* incoming_ = nullptr;
  float* sum_ = nullptr;
  float* decoded_ = nullptr;
  // Last: cancelled (in its destructor) before anything above goes away.
  InFlightTransfers transfers_;
};

}  // namespace

ncclResult_t compressed_sra_allreduce(const CompressedArgs& args,
                                      const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  ScatterReduceAllgather sra(args, context);
  return sra.run();
}

}  // namespace terse
