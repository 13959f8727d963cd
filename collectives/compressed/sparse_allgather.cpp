// Sparse allgather: the compressed allreduce of sparsifiers (top-k, threshold, DGC, Random-K
// with its own indices). Each rank encodes its whole tensor once (so DGC's momentum state and
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
// scatter-adds against one decode plus the ring's additions) and are left out.
//
// Either way each element went through one lossy encode (lossy_steps 1); the sum is exact in
// fp32 arithmetic. Steps: 0 the sizes, 1 the messages, 2.. the dense ring.
#include <algorithm>
#include <vector>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/group_allgatherv.h"
#include "collectives/compressed/group_allreduce.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

constexpr uint32_t kSizeStep = 0;
constexpr uint32_t kMessageStep = 1;
constexpr uint32_t kDenseFirstStep = 2;

size_t slot(int position) {
  return static_cast<size_t>(position);
}

// The switch of the file comment, from every rank's message size: true when a dense ring moves
// fewer bytes over the busiest link than the direct allgatherv of these messages.
bool dense_is_cheaper(const std::vector<uint64_t>& sizes, size_t count) {
  const uint64_t n = sizes.size();
  uint64_t total = 0;
  for (uint64_t size : sizes) total += size;
  uint64_t busiest = 0;
  for (uint64_t size : sizes) busiest = std::max({busiest, (n - 1) * size, total - size});
  return n * busiest > 2 * (n - 1) * sizeof(float) * uint64_t{count};
}

}  // namespace

ncclResult_t sparse_allgather_allreduce(const CompressedArgs& args,
                                        const CompressedContext& context) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  if (n == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  CompressionScratch& scratch = *context.scratch;

  const size_t capacity = message_capacity(args, args.count);
  uint8_t* own = nullptr;
  size_t own_bytes = 0;
  TERSE_CHECK(encode_whole_contribution(args, context, &own, &own_bytes));

  std::vector<uint64_t> sizes;
  TERSE_CHECK(exchange_sizes(context, kSizeStep, own_bytes, &sizes));
  for (int j = 0; j < n; ++j) {
    if (sizes[slot(j)] > capacity) {
      return fail(ncclInvalidUsage,
                  "sparse allgather: rank %d announced a %llu-byte message, above the %zu bytes "
                  "codec %s can produce for %zu elements; do all ranks pass the same count?",
                  group.rank_at(j), static_cast<unsigned long long>(sizes[slot(j)]), capacity,
                  args.codec->spec().c_str(), args.count);
    }
  }

  float* sum = result_buffer(args, context, ScratchSlot::kAccumulator);
  if (dense_is_cheaper(sizes, args.count)) {
    TERSE_CHECK(decode_message(args, context, own, own_bytes, sum, args.count, false));
    TERSE_CHECK(
        group_allreduce_sum(sum, args.count, context, context.first_step + kDenseFirstStep));
    write_result(args, sum, ElementRange{0, args.count});
    return ncclSuccess;
  }

  // The peers' messages, back to back in position order (this rank's own stays in `own`).
  std::vector<size_t> offsets(slot(n), 0);
  size_t incoming_bytes = 0;
  for (int j = 0; j < n; ++j) {
    offsets[slot(j)] = incoming_bytes;
    if (j != group.index) incoming_bytes += sizes[slot(j)];
  }
  uint8_t* incoming = scratch.bytes(ScratchSlot::kIncoming, incoming_bytes);
  const uint32_t operation = make_operation(context.sequence, context.first_step + kMessageStep);
  // Slots: sends 0..n-1, receives n..2n-1, by peer position. Receives are posted before any
  // send and nothing waits before every send is posted, so no rank can block another.
  InFlightTransfers transfers(context.transport, 2 * slot(n), context.deadline);
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
    TERSE_CHECK(decode_message(args, context, message, sizes[slot(j)], sum, args.count,
                               /*accumulate=*/j > 0));
  }
  write_result(args, sum, ElementRange{0, args.count});
  return transfers.wait_all();
}

}  // namespace terse
