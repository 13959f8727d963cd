// Sparse allgather: the compressed allreduce of sparsifiers (top-k, threshold, DGC, Random-K
// with its own indices). Two ways, every rank taking the same one:
//
// Chunked (codecs that keep a fixed fraction of any part, Codec::keeps_fraction(): top-k by
// ratio; no codec state, full warm-up progress, and sparse by the rule below even for the
// largest messages the codec can produce): the tensor is cut into C near-equal chunks,
// C = min(64, ceil(count / (16 * piece_bytes / 4))) (4 MiB of fp32 per chunk at the default
// 256 KiB pieces). Each chunk is a tensor of its own to the codec: top-k keeps
// round(ratio * chunk) of each chunk's largest (at least 1), not the k largest of the whole
// tensor. Every rank compensates, selects and encodes chunk c (with error feedback fused into
// the selection when the codec can: compensate_and_encode), sends it straight to every other
// rank, and goes on to chunk c+1 while chunk c is on the wire; between chunks, and at the end,
// it decodes every chunk whose n messages have all arrived, in group-position order (the first
// non-accumulating into the chunk's range of the fp32 sum, the others adding: a scatter-add).
// No sizes are exchanged: receives are posted for the most a chunk's message can take
// (Codec::wire_bytes of the chunk plus a whole escape section). Per chunk c the stated bounds
// hold as for a tensor: exact keeps the k_c largest, so ||x_c - decoded_c||^2 <=
// (1 - k_c/count_c) ||x_c||^2, and summed over chunks the error is at most
// (1 - min_c k_c/count_c) ||x||^2; every dropped element still moves by at most max|x| (the
// codec's factor 1).
//
// Whole (every other case): each rank encodes its whole tensor once (so DGC's momentum state and
// the residual see the whole tensor; with memory `momentum` the entry has a state and no
// residual, and contribution.h passes exactly that), the ranks tell each other their message
// sizes (8 bytes to every peer), then every rank takes the same branch, decided from those
// sizes alone:
//   sparse: every rank sends its (index, value) message straight to every other rank (a direct
//           allgatherv: one latency, n-1 messages in flight) and decodes all n messages in
//           group-position order, adding into an fp32 sum (scatter-add), each as soon as it
//           has arrived and its predecessors are added, so decoding overlaps the receives.
//           Every rank adds the same values in the same order, so all hold the same bits.
//   dense:  each rank decodes its own message into a dense fp32 buffer and the group sums those
//           exactly (group_allreduce_sum, a ring: 2 (n-1)/n * count * 4 bytes per rank).
//
// The switch (SparCML's: go dense once the union of the selections is dense enough that the
// sparse representation costs more than the dense one), in bytes on the busiest link: in the
// direct allgatherv rank j sends (n-1) s_j and receives T - s_j (s_j its message, T the sum of
// all n), so the exchange takes as long as the largest of these over all ranks, L. The dense
// ring moves D = 2 (n-1)/n * count * 4 each way on every rank. Dense when L > D, i.e.
// n L > 2 (n-1) 4 count (integers, no rounding). With equal messages of k fp32 (index, value)
// pairs this is n k > count (plus headers): dense once the ranks' selections together could
// cover the tensor. Counting the busiest rank, not the mean, matters for threshold, whose
// message sizes differ from rank to rank. Decode costs are alike on both sides (n sparse
// scatter-adds against one decode plus the ring's additions) and are left out. The chunked way
// applies the rule to s_j = the sum of every chunk's wire_bytes, the same for every rank: an
// upper bound of the real sizes, and the rule is monotone in them, so the real sizes would have
// chosen sparse too.
//
// Either way each element went through one lossy encode (lossy_steps 1); the sum is exact in
// fp32 arithmetic. Steps: whole: 0 the sizes, 1 the messages, 2.. the dense ring; chunked:
// 1 + c chunk c's messages.
//
// Memory: compensation, selection and encode, the decodes (scatter-adds) into the sum and the
// result write go through the call's execution backend (execution_backend.h), so device buffers
// run them as kernels on the caller's stream with a device residual, and only the encoded
// messages cross PCIe: each of this rank's messages to the host, every message it decodes (its
// own and its peers') to the device, each validated on the host first. A message is sent only
// once the backend has it in host memory (wait_messages), and every message buffer is used once
// per call, so none is rewritten while a decode may still read it. The dense branch's ring runs
// on host memory: there this rank decodes its own message on the host and the fp32 sum crosses
// to the device once (copy_from_host; nothing on the host backend, where it is the result).
#include <algorithm>
#include <array>

#include "codecs/nonfinite_escapes.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/compressed/group_allgatherv.h"
#include "collectives/compressed/group_allreduce.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

constexpr uint32_t kSizeStep = 0;
constexpr uint32_t kMessageStep = 1;
constexpr uint32_t kDenseFirstStep = 2;

size_t slot(int position) {
  return static_cast<size_t>(position);
}

// The switch of the file comment, from the bytes over the busiest link of the direct allgatherv
// among n ranks: true when a dense ring moves fewer.
bool dense_beats(uint64_t n, uint64_t busiest, size_t count) {
  return n * busiest > 2 * (n - 1) * sizeof(float) * uint64_t{count};
}

// The switch from every rank's message size (sizes[0..n)).
bool dense_is_cheaper(const uint64_t* sizes, uint64_t n, size_t count) {
  uint64_t total = 0;
  for (uint64_t j = 0; j < n; ++j) total += sizes[j];
  uint64_t busiest = 0;
  for (uint64_t j = 0; j < n; ++j) {
    busiest = std::max({busiest, (n - 1) * sizes[j], total - sizes[j]});
  }
  return dense_beats(n, busiest, count);
}

// The same when every rank's message has `size` bytes: the busiest link carries (n - 1) size.
bool dense_is_cheaper_equal(uint64_t size, uint64_t n, size_t count) {
  return dense_beats(n, (n - 1) * size, count);
}

// Chunks of the chunked way: about kPiecesPerChunk pipeline pieces each, at most kMaxChunks.
constexpr size_t kPiecesPerChunk = 16;
constexpr size_t kMaxChunks = 64;

size_t chunk_count(size_t count, size_t piece_bytes) {
  const size_t target = std::max<size_t>(1, piece_bytes / sizeof(float)) * kPiecesPerChunk;
  return std::max<size_t>(1, std::min(kMaxChunks, (count + target - 1) / target));
}

// Whether the call takes the chunked way (file comment).
bool chunked(const CompressedArgs& args, int n, size_t chunks) {
  if (!args.codec->keeps_fraction() || args.encode.warmup_progress != 1.0) return false;
  if (args.entry != nullptr && args.entry->state() != nullptr) return false;
  if (args.codec->stateful(args.count, DType::kFloat32, args.encode.shape)) return false;
  uint64_t most = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t elements =
        near_equal_block(args.count, static_cast<int>(chunks), static_cast<int>(c)).count;
    most += args.codec->wire_bytes(elements, DType::kFloat32, MatrixShape{});
  }
  return !dense_is_cheaper_equal(most, slot(n), args.count);
}

// The chunked way: chunk c encoded and sent while chunk c-1 is on the wire, chunks decoded as
// their messages arrive.
class ChunkedAllgather {
 public:
  ChunkedAllgather(const CompressedArgs& args, const CompressedContext& context,
                   ExecutionBackend& backend, size_t chunks)
      : args_(args),
        context_(context),
        backend_(backend),
        n_(context.group.size()),
        me_(context.group.index),
        chunks_(chunks),
        capacity_(chunk_capacity(args, chunk_range(args.count, chunks, 0).count)),
        transfers_(context.transport, 2 * chunks * slot(n_), context.deadline,
                   context.scratch->transfer_slots()) {}

  ncclResult_t run() {
    TERSE_CHECK(lay_out());
    for (size_t c = 0; c < chunks_; ++c) {
      for (int j = 0; j < n_; ++j) {
        if (j == me_) continue;
        TERSE_CHECK(transfers_.recv_up_to(recv_slot(c, j), context_.group.rank_at(j), operation(c),
                                          incoming(c, j), capacity_));
      }
    }
    for (size_t c = 0; c < chunks_; ++c) {
      TERSE_CHECK(backend_.encode_contribution(args_, context_, values_, chunk(c), outgoing(c),
                                               capacity_, &own_bytes_[c]));
      TERSE_CHECK(backend_.wait_messages());
      // Staggered (the next position first), so that not every rank feeds position 0 first.
      for (int k = 1; k < n_; ++k) {
        const int j = (me_ + k) % n_;
        TERSE_CHECK(transfers_.send(send_slot(c, j), context_.group.rank_at(j), operation(c),
                                    outgoing(c), own_bytes_[c]));
        count_sent(context_, own_bytes_[c]);
      }
      encoded_ = c + 1;
      context_.transport->progress();
      TERSE_CHECK(decode_arrived(false));
    }
    TERSE_CHECK(decode_arrived(true));
    return transfers_.wait_all();
  }

 private:
  static ElementRange chunk_range(size_t count, size_t chunks, size_t c) {
    return near_equal_block(count, static_cast<int>(chunks), static_cast<int>(c));
  }
  // The most one chunk's message takes: the codec's largest message, and room for escapes;
  // rounded up to a cache line, so that every message starts aligned (its indices are read as
  // uint32, its values as floats).
  static size_t chunk_capacity(const CompressedArgs& args, size_t elements) {
    const size_t bytes = args.codec->wire_bytes(elements, DType::kFloat32, MatrixShape{}) +
                         max_escape_section_bytes(elements);
    return (bytes + kMessageAlignment - 1) / kMessageAlignment * kMessageAlignment;
  }
  ElementRange chunk(size_t c) const { return chunk_range(args_.count, chunks_, c); }
  uint32_t operation(size_t c) const {
    return make_operation(context_.sequence,
                          context_.first_step + kMessageStep + static_cast<uint32_t>(c));
  }
  size_t send_slot(size_t c, int j) const { return c * slot(n_) + slot(j); }
  size_t recv_slot(size_t c, int j) const { return (chunks_ + c) * slot(n_) + slot(j); }
  uint8_t* outgoing(size_t c) const { return outgoing_ + c * capacity_; }
  uint8_t* incoming(size_t c, int j) const {
    return incoming_ + (c * slot(n_) + slot(j)) * capacity_;
  }

  ncclResult_t lay_out() {
    const bool fused = backend_.fuses_contribution(args_);
    values_ = fused ? nullptr : backend_.floats(context_, ScratchSlot::kValues, args_.count);
    outgoing_ = backend_.message_buffer(context_, ScratchSlot::kOutgoing, chunks_ * capacity_);
    incoming_ =
        backend_.message_buffer(context_, ScratchSlot::kIncoming, chunks_ * slot(n_) * capacity_);
    sum_ = backend_.result_floats(args_, context_, ScratchSlot::kAccumulator);
    own_bytes_.fill(0);
    // Null from the backend: an allocation failed (its error is this thread's last).
    const bool laid_out = (fused || values_ != nullptr) && outgoing_ != nullptr &&
                          incoming_ != nullptr && sum_ != nullptr;
    return laid_out ? ncclSuccess : ncclSystemError;
  }

  // Decodes, in chunk order, every encoded chunk whose messages have all arrived (waiting for
  // them when `wait`), each into its range of the sum, in group-position order.
  ncclResult_t decode_arrived(bool wait) {
    for (; decoded_ < encoded_; ++decoded_) {
      const size_t c = decoded_;
      for (int j = 0; j < n_; ++j) {
        if (j == me_) continue;
        if (wait) {
          TERSE_CHECK(transfers_.wait(recv_slot(c, j)));
        } else if (!transfers_.finished(recv_slot(c, j))) {
          return ncclSuccess;
        }
      }
      const ElementRange range = chunk(c);
      float* sum = sum_ + range.offset;
      for (int j = 0; j < n_; ++j) {
        const uint8_t* message = j == me_ ? outgoing(c) : incoming(c, j);
        const size_t bytes = j == me_ ? own_bytes_[c] : transfers_.received_bytes(recv_slot(c, j));
        TERSE_CHECK(backend_.decode(args_, context_, message, bytes, sum, range.count,
                                    /*accumulate=*/j > 0));
      }
      TERSE_CHECK(backend_.write_result(args_, sum, range));
    }
    return ncclSuccess;
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  ExecutionBackend& backend_;
  const int n_;
  const int me_;
  const size_t chunks_;
  const size_t capacity_;
  InFlightTransfers transfers_;
  float* values_ = nullptr;
  uint8_t* outgoing_ = nullptr;
  uint8_t* incoming_ = nullptr;
  float* sum_ = nullptr;
  std::array<size_t, kMaxChunks> own_bytes_;  // by chunk
  size_t encoded_ = 0;
  size_t decoded_ = 0;
};

// The whole way (file comment) on `backend` (group of two or more, count > 0).
ncclResult_t run_whole(const CompressedArgs& args, const CompressedContext& context,
                       ExecutionBackend& backend) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  const size_t capacity = message_capacity(args, args.count);
  const bool fused = backend.fuses_contribution(args);
  float* values = fused ? nullptr : backend.floats(context, ScratchSlot::kValues, args.count);
  uint8_t* own = backend.message_buffer(context, ScratchSlot::kOutgoing, capacity);
  if ((!fused && values == nullptr) || own == nullptr) return ncclSystemError;
  size_t own_bytes = 0;
  TERSE_CHECK(backend.encode_contribution(args, context, values, ElementRange{0, args.count}, own,
                                          capacity, &own_bytes));

  // Every rank's message size and where its message lands in `incoming`, by group position, in
  // the call's scratch (no allocation once warm).
  uint64_t* sizes = reinterpret_cast<uint64_t*>(
      context.scratch->bytes(ScratchSlot::kSecondary, 2 * slot(n) * sizeof(uint64_t)));
  uint64_t* offsets = sizes + slot(n);
  // The size is known at once; the message's copy to the host goes on meanwhile.
  TERSE_CHECK(exchange_sizes(context, kSizeStep, own_bytes, sizes));
  for (int j = 0; j < n; ++j) {
    if (sizes[slot(j)] > capacity) {
      return fail(ncclInvalidUsage,
                  "sparse allgather: rank %d announced a %llu-byte message, above the %zu bytes "
                  "codec %s can produce for %zu elements; do all ranks pass the same count?",
                  group.rank_at(j), static_cast<unsigned long long>(sizes[slot(j)]), capacity,
                  args.codec->spec().c_str(), args.count);
    }
  }
  TERSE_CHECK(backend.wait_messages());

  float* sum = backend.result_floats(args, context, ScratchSlot::kAccumulator);
  if (sum == nullptr) return ncclSystemError;
  const ElementRange whole{0, args.count};
  if (dense_is_cheaper(sizes, slot(n), args.count)) {
    // The ring sums host memory: on the host backend the result itself, else the backend's
    // pinned message memory (kIncoming: no peer message is received on this branch), whose sum
    // then crosses to the backend's memory once, asynchronously.
    float* host_sum = backend.memory() == Memory::kHost
                          ? sum
                          : reinterpret_cast<float*>(backend.message_buffer(
                                context, ScratchSlot::kIncoming, args.count * sizeof(float)));
    if (host_sum == nullptr) return ncclSystemError;
    TERSE_CHECK(decode_message(args, context, own, own_bytes, host_sum, args.count, false));
    TERSE_CHECK(
        group_allreduce_sum(host_sum, args.count, context, context.first_step + kDenseFirstStep));
    TERSE_CHECK(backend.copy_from_host(context, sum, host_sum, args.count));
    return backend.write_result(args, sum, whole);
  }

  // The peers' messages in position order, each from a cache line (a message with an escape
  // section can have any length), this rank's own staying in `own`.
  size_t incoming_bytes = 0;
  for (int j = 0; j < n; ++j) {
    offsets[slot(j)] = incoming_bytes;
    if (j != group.index) {
      incoming_bytes +=
          (sizes[slot(j)] + kMessageAlignment - 1) / kMessageAlignment * kMessageAlignment;
    }
  }
  // Room for every peer's largest message, not only this call's: a later call's messages may
  // escape NaN or Inf and be longer, perhaps while the caller's stream is held (device buffers),
  // when nothing can be allocated.
  const size_t room = static_cast<size_t>(n - 1) * capacity;  // capacity: cache lines already
  uint8_t* incoming =
      backend.message_buffer(context, ScratchSlot::kIncoming, std::max(incoming_bytes, room));
  if (incoming == nullptr) return ncclSystemError;
  const uint32_t operation = make_operation(context.sequence, context.first_step + kMessageStep);
  // Slots: sends 0..n-1, receives n..2n-1, by peer position. Receives are posted before any
  // send and nothing waits before every send is posted, so no rank can block another.
  InFlightTransfers transfers(context.transport, 2 * slot(n), context.deadline,
                              context.scratch->transfer_slots());
  for (int j = 0; j < n; ++j) {
    if (j == group.index) continue;
    TERSE_CHECK(transfers.recv(slot(n + j), group.rank_at(j), operation,
                               incoming + offsets[slot(j)], sizes[slot(j)]));
  }
  // Staggered (the next position first), so that not every rank feeds position 0 first.
  for (int k = 1; k < n; ++k) {
    const int j = (group.index + k) % n;
    TERSE_CHECK(transfers.send(slot(j), group.rank_at(j), operation, own, own_bytes));
    count_sent(context, own_bytes);
  }
  for (int j = 0; j < n; ++j) {
    const uint8_t* message = own;
    if (j != group.index) {
      TERSE_CHECK(transfers.wait(slot(n + j)));
      message = incoming + offsets[slot(j)];
    }
    TERSE_CHECK(backend.decode(args, context, message, sizes[slot(j)], sum, args.count,
                               /*accumulate=*/j > 0));
  }
  TERSE_CHECK(backend.write_result(args, sum, whole));
  return transfers.wait_all();
}

}  // namespace

ncclResult_t sparse_allgather_allreduce(const CompressedArgs& args,
                                        const CompressedContext& context) {
  const int n = context.group.size();
  if (n == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  ExecutionBackend& backend = backend_of(context);
  const size_t chunks = chunk_count(args.count, context.piece_bytes);
  const ncclResult_t result = chunked(args, n, chunks)
                                  ? ChunkedAllgather(args, context, backend, chunks).run()
                                  : run_whole(args, context, backend);
  // Whatever the run returned: device work it enqueued may still read the call's buffers.
  const ncclResult_t finished = backend.finish();
  return result != ncclSuccess ? result : finished;
}

}  // namespace terse
