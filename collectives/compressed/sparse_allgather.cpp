// Sparse allgather: the compressed allreduce of sparsifiers (top-k, threshold, DGC, Random-K
// with its own indices). Each rank encodes its whole tensor once (so DGC's momentum state and
// the residual see the whole tensor), the ranks tell each other their message sizes, then
// either
//   sparse: every rank sends its (index, value) message to every other rank (an allgatherv),
//           and every rank decodes all n messages in group-position order, adding into an fp32
//           sum (scatter-add): every rank adds the same values in the same order, so all hold
//           the same bits; or
//   dense:  when the messages together exceed twice the dense tensor (sum of message bytes >
//           2 * count * 4), an allgatherv would move more than a dense ring allreduce
//           (2 (n-1)/n * count * 4 bytes per rank against (n-1)/n of the sum of messages), so
//           each rank decodes its own message into a dense fp32 buffer and the group sums those
//           exactly (group_allreduce_sum). This is SparCML's switch to a dense representation
//           once the union of the selections is dense, decided from the exchanged sizes, so
//           every rank takes the same branch.
// Either way each element went through one lossy encode (lossy_steps 1); the sum is exact in
// fp32 arithmetic.
//
// Steps: 0 the sizes, 1 the messages, 2.. the dense fallback's ring.
#include <cstring>
#include <vector>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/group_allreduce.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

constexpr uint32_t kSizeStep = 0;
constexpr uint32_t kMessageStep = 1;
constexpr uint32_t kDenseFirstStep = 2;

}  // namespace

ncclResult_t sparse_allgather_allreduce(const CompressedArgs& args,
                                        const CompressedContext& context) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  if (n == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  const auto slot = [](int position) { return static_cast<size_t>(position); };
  const auto operation = [&](uint32_t step) {
    return make_operation(context.sequence, context.first_step + step);
  };
  CompressionScratch& scratch = *context.scratch;

  float* values = scratch.floats(ScratchSlot::kValues, args.count);
  TERSE_CHECK(make_contribution(args, context, values));
  const size_t capacity = message_capacity(args, args.count);
  uint8_t* own = scratch.bytes(ScratchSlot::kOutgoing, capacity);
  size_t own_bytes = 0;
  TERSE_CHECK(encode_contribution(args, context, values, ElementRange{0, args.count}, own, capacity,
                                  &own_bytes));

  // Sizes: one 8-byte message to every peer. Slots: sends 0..n-1, receives n..2n-1.
  std::vector<uint64_t> sizes(slot(n), 0);
  sizes[slot(group.index)] = own_bytes;
  {
    InFlightTransfers transfers(context.transport, 2 * slot(n), context.deadline);
    for (int j = 0; j < n; ++j) {
      if (j == group.index) continue;
      TERSE_CHECK(transfers.recv(slot(n + j), group.rank_at(j), operation(kSizeStep),
                                 &sizes[slot(j)], sizeof(uint64_t)));
      TERSE_CHECK(transfers.send(slot(j), group.rank_at(j), operation(kSizeStep),
                                 &sizes[slot(group.index)], sizeof(uint64_t)));
      count_sent(context, sizeof(uint64_t));
    }
    TERSE_CHECK(transfers.wait_all());
  }
  uint64_t total = 0;
  for (int j = 0; j < n; ++j) {
    if (sizes[slot(j)] > capacity) {
      return fail(ncclInvalidUsage,
                  "sparse allgather: rank %d announced a %llu-byte message, above the %zu bytes "
                  "codec %s can produce for %zu elements; do all ranks pass the same count?",
                  group.rank_at(j), static_cast<unsigned long long>(sizes[slot(j)]), capacity,
                  args.codec->spec().c_str(), args.count);
    }
    total += sizes[slot(j)];
  }

  float* sum = scratch.floats(ScratchSlot::kAccumulator, args.count);
  if (total > 2 * uint64_t{4} * args.count) {
    TERSE_CHECK(decode_message(args, context, own, own_bytes, sum, args.count, false));
    float* ring_scratch =
        scratch.floats(ScratchSlot::kTertiary, group_allreduce_scratch(args.count, n));
    TERSE_CHECK(group_allreduce_sum(sum, args.count, context, context.first_step + kDenseFirstStep,
                                    ring_scratch));
    write_result(args, sum, ElementRange{0, args.count});
    return ncclSuccess;
  }

  // Every message, laid out in position order (this rank's own copied into place).
  std::vector<size_t> offsets(slot(n), 0);
  size_t all_bytes = 0;
  for (int j = 0; j < n; ++j) {
    offsets[slot(j)] = all_bytes;
    all_bytes += sizes[slot(j)];
  }
  uint8_t* messages = scratch.bytes(ScratchSlot::kIncoming, all_bytes);
  std::memcpy(messages + offsets[slot(group.index)], own, own_bytes);
  InFlightTransfers transfers(context.transport, 2 * slot(n), context.deadline);
  for (int j = 0; j < n; ++j) {
    if (j == group.index) continue;
    TERSE_CHECK(transfers.recv(slot(n + j), group.rank_at(j), operation(kMessageStep),
                               messages + offsets[slot(j)], sizes[slot(j)]));
  }
  for (int k = 1; k < n; ++k) {
    const int j = (group.index + k) % n;
    TERSE_CHECK(transfers.send(slot(j), group.rank_at(j), operation(kMessageStep), own, own_bytes));
    count_sent(context, own_bytes);
  }
  for (int j = 0; j < n; ++j) {
    if (j != group.index) TERSE_CHECK(transfers.wait(slot(n + j)));
    TERSE_CHECK(decode_message(args, context, messages + offsets[slot(j)], sizes[slot(j)], sum,
                               args.count, j > 0));
  }
  write_result(args, sum, ElementRange{0, args.count});
  return transfers.wait_all();
}

}  // namespace terse
