// Compressed binary tree, for small messages: two passes of 1 + floor(log2 n) hops instead of the
// ring's 2(n-1) steps. Group position i has parent (i-1)/2 and children 2i+1, 2i+2.
//
//   up:   a leaf encodes its own contribution (with its residual) and sends it to its parent; an
//         inner rank adds the decodes of its children's messages (first child, then second) to
//         its own contribution (exact, so its residual is delivered and cleared) and sends the
//         encoded partial sum up; the root's partial sum is the total;
//   down: the root encodes the total once and that message travels down unchanged; every rank,
//         the root included, decodes it, so all hold the same bits.
// The deepest leaf's value is encoded at each of its floor(log2 n) levels and once more by the
// root: lossy_steps floor(log2 n) + 1 = ceil(log2(n + 1)).
//
// Steps: 0 up, 1 down.
#include <cstring>

#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {

ncclResult_t compressed_tree_allreduce(const CompressedArgs& args,
                                       const CompressedContext& context) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  if (n == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  const int me = group.index;
  const int parent = me == 0 ? -1 : (me - 1) / 2;
  int children[2];
  int child_count = 0;
  for (int child : {2 * me + 1, 2 * me + 2}) {
    if (child < n) children[child_count++] = child;
  }
  const auto operation = [&](uint32_t step) {
    return make_operation(context.sequence, context.first_step + step);
  };
  constexpr uint32_t kUp = 0, kDown = 1;

  CompressionScratch& scratch = *context.scratch;
  const size_t capacity = message_capacity(args, args.count);
  float* values = scratch.floats(ScratchSlot::kValues, args.count);
  float* sum = scratch.floats(ScratchSlot::kAccumulator, args.count);
  uint8_t* up = scratch.bytes(ScratchSlot::kOutgoing, capacity);
  uint8_t* from_children = scratch.bytes(ScratchSlot::kIncoming, 2 * capacity);
  uint8_t* down = scratch.bytes(ScratchSlot::kSecondary, capacity);
  TERSE_CHECK(make_contribution(args, context, values));

  // Slots: 0 up-send, 1-2 children's up-messages, 3 down-receive, 4-5 down-sends.
  InFlightTransfers transfers(context.transport, 6, context.deadline);
  for (int c = 0; c < child_count; ++c) {
    TERSE_CHECK(transfers.recv_up_to(static_cast<size_t>(1 + c), group.rank_at(children[c]),
                                     operation(kUp), from_children + c * capacity, capacity));
  }
  if (parent >= 0) {
    TERSE_CHECK(transfers.recv_up_to(3, group.rank_at(parent), operation(kDown), down, capacity));
  }

  size_t bytes = 0;
  if (child_count == 0) {
    TERSE_CHECK(encode_contribution(args, context, values, ElementRange{0, args.count}, up,
                                    capacity, &bytes));
  } else {
    std::memcpy(sum, values, args.count * sizeof(float));
    for (int c = 0; c < child_count; ++c) {
      TERSE_CHECK(transfers.wait(static_cast<size_t>(1 + c)));
      TERSE_CHECK(decode_message(args, context, from_children + c * capacity,
                                 transfers.received_bytes(static_cast<size_t>(1 + c)), sum,
                                 args.count, true));
    }
    float* residual = args.entry != nullptr ? args.entry->residual() : nullptr;
    if (residual != nullptr) std::memset(residual, 0, args.count * sizeof(float));
    TERSE_CHECK(encode_partial(args, context, sum, args.count, nullptr, parent >= 0 ? up : down,
                               capacity, &bytes));
  }
  size_t down_bytes = bytes;
  if (parent >= 0) {
    TERSE_CHECK(transfers.send(0, group.rank_at(parent), operation(kUp), up, bytes));
    count_sent(context, bytes);
    TERSE_CHECK(transfers.wait(3));
    down_bytes = transfers.received_bytes(3);
  }
  for (int c = 0; c < child_count; ++c) {
    TERSE_CHECK(transfers.send(static_cast<size_t>(4 + c), group.rank_at(children[c]),
                               operation(kDown), down, down_bytes));
    count_sent(context, down_bytes);
  }
  TERSE_CHECK(decode_message(args, context, down, down_bytes, sum, args.count, false));
  write_result(args, sum, ElementRange{0, args.count});
  return transfers.wait_all();
}

}  // namespace terse
