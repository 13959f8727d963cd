// Compressed binary tree, for small messages: two passes of floor(log2 n) hops instead of the
// ring's 2(n-1) steps. Group position i has parent (i-1)/2 and children 2i+1, 2i+2: a heap
// layout, the shallowest binary tree, so the fewest re-encodes on the deepest path (the binomial
// tree of tree_pattern.h is ceil(log2 n) deep and gives the root log2 n children).
//
//   up:   a leaf encodes its own contribution (encode_contribution, with its residual) and sends
//         it to its parent; an inner rank adds the decodes of its children's messages (first
//         child, then second) to its own contribution, exactly, and sends the encoded partial
//         sum up; the root's partial sum is the total;
//   down: the root encodes the total once and that message travels down unchanged; every rank,
//         the root included, decodes it, so all hold the same bits.
// The deepest leaf's value is encoded by itself, by each of its floor(log2 n) - 1 inner
// ancestors, and by the root: lossy_steps = depth + 1 = floor(log2 n) + 1 = ceil(log2(n + 1)).
//
// Error feedback (memory `residual`): every rank encodes exactly once (a leaf its contribution,
// an inner rank its partial sum, the root the total) and keeps that encode's error as its
// residual; its old residual went into the sum exactly. So the result is the sum of the
// contributions less the new residuals, and over calls the errors telescope (as in the ring).
//
// No deadlock: every receive (children's up-messages, the parent's down-message) is posted
// before anything is sent; a rank sends up only after its children's messages arrived, and
// down only after its parent's did, so every awaited message does get sent. Steps: 0 up, 1 down.
//
// Memory: the codec work and the tensor-sized values go through the call's execution backend
// (execution_backend.h), so device buffers run them as kernels and only the encoded messages
// cross to the host; a message is sent only once the backend has it in host memory
// (wait_messages). Every message buffer is used once per call, so none is rewritten while a
// decode the backend enqueued may still read it.
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

constexpr uint32_t kUpStep = 0;
constexpr uint32_t kDownStep = 1;

// Transfer slots of one rank.
constexpr size_t kUpSend = 0;
constexpr size_t kChildUpReceive = 1;  // + c for child c (0, 1)
constexpr size_t kDownReceive = 3;
constexpr size_t kChildDownSend = 4;  // + c for child c
constexpr size_t kSlots = 6;

// One rank's place in the heap-ordered binary tree over group positions 0 .. n-1.
struct BinaryTreePosition {
  BinaryTreePosition(int position, int n) {
    parent = position == 0 ? -1 : (position - 1) / 2;
    for (int child : {2 * position + 1, 2 * position + 2}) {
      if (child < n) children[child_count++] = child;
    }
  }
  int parent;  // -1 for the root
  int children[2] = {-1, -1};
  int child_count = 0;
};

// The up and down passes on `backend` (group of two or more, count > 0).
ncclResult_t run_tree(const CompressedArgs& args, const CompressedContext& context,
                      ExecutionBackend& backend) {
  const PeerGroup& group = context.group;
  const BinaryTreePosition tree(group.index, group.size());
  const auto operation = [&](uint32_t step) {
    return make_operation(context.sequence, context.first_step + step);
  };

  const size_t capacity = message_capacity(args, args.count);
  const ElementRange whole{0, args.count};
  // This rank's contribution, then (inner ranks) its subtree's partial sum, then the result.
  float* values = backend.floats(context, ScratchSlot::kValues, args.count);
  uint8_t* up = backend.message_buffer(context, ScratchSlot::kOutgoing, capacity);
  uint8_t* from_children = backend.message_buffer(context, ScratchSlot::kIncoming, 2 * capacity);
  uint8_t* down = backend.message_buffer(context, ScratchSlot::kSecondary, capacity);
  // Null from the backend: an allocation failed (its error is this thread's last).
  if (values == nullptr || up == nullptr || from_children == nullptr || down == nullptr) {
    return ncclSystemError;
  }
  float* residual = call_residual(args);

  InFlightTransfers transfers(context.transport, kSlots, context.deadline);
  for (int c = 0; c < tree.child_count; ++c) {
    TERSE_CHECK(transfers.recv_up_to(kChildUpReceive + c, group.rank_at(tree.children[c]),
                                     operation(kUpStep), from_children + c * capacity, capacity));
  }
  if (tree.parent >= 0) {
    TERSE_CHECK(transfers.recv_up_to(kDownReceive, group.rank_at(tree.parent), operation(kDownStep),
                                     down, capacity));
  }

  // Up: this rank's one encode (a leaf's contribution, an inner rank's partial sum, the
  // root's total, which goes straight into the down message).
  size_t bytes = 0;
  if (tree.child_count == 0) {
    TERSE_CHECK(backend.encode_contribution(args, context, values, whole, up, capacity, &bytes));
  } else {
    TERSE_CHECK(backend.make_contribution(args, context, values, whole));
    for (int c = 0; c < tree.child_count; ++c) {
      TERSE_CHECK(transfers.wait(kChildUpReceive + c));
      TERSE_CHECK(backend.decode(args, context, from_children + c * capacity,
                                 transfers.received_bytes(kChildUpReceive + c), values, args.count,
                                 true));
    }
    TERSE_CHECK(backend.encode_partial(args, context, values, whole, residual,
                                       tree.parent >= 0 ? up : down, capacity, &bytes));
  }
  TERSE_CHECK(backend.wait_messages());

  // Down: the root's message, forwarded unchanged.
  size_t down_bytes = bytes;
  if (tree.parent >= 0) {
    TERSE_CHECK(transfers.send(kUpSend, group.rank_at(tree.parent), operation(kUpStep), up, bytes));
    count_sent(context, bytes);
    TERSE_CHECK(transfers.wait(kDownReceive));
    down_bytes = transfers.received_bytes(kDownReceive);
  }
  for (int c = 0; c < tree.child_count; ++c) {
    TERSE_CHECK(transfers.send(kChildDownSend + c, group.rank_at(tree.children[c]),
                               operation(kDownStep), down, down_bytes));
    count_sent(context, down_bytes);
  }
  TERSE_CHECK(backend.decode(args, context, down, down_bytes, values, args.count, false));
  TERSE_CHECK(backend.write_result(args, values, whole));
  return transfers.wait_all();
}

}  // namespace

ncclResult_t compressed_tree_allreduce(const CompressedArgs& args,
                                       const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  ExecutionBackend& backend = backend_of(context);
  const ncclResult_t result = run_tree(args, context, backend);
  // Whatever the passes returned: device work they enqueued may still read the call's buffers.
  const ncclResult_t finished = backend.finish();
  return result != ncclSuccess ? result : finished;
}

}  // namespace terse
