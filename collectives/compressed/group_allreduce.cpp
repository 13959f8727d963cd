#include "collectives/compressed/group_allreduce.h"

#include "collectives/algorithm_scratch.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/collective_args.h"

namespace terse {
namespace {

// The ring's scratch from the compressed call's (ScratchSlot::kGroupSum), which the communicator
// keeps: the sum allocates nothing once warm, from whichever thread the call comes.
class GroupSumScratch final : public ScratchLender {
 public:
  explicit GroupSumScratch(CompressionScratch* scratch) : scratch_(scratch) {}
  uint8_t* lend(size_t bytes) override { return scratch_->bytes(ScratchSlot::kGroupSum, bytes); }

 private:
  CompressionScratch* scratch_;
};

}  // namespace

ncclResult_t group_allreduce_sum(float* values, size_t count, const CompressedContext& context,
                                 uint32_t first_step) {
  CollectiveArgs args;
  args.send = values;
  args.recv = values;
  args.count = count;
  args.type = ncclFloat32;  // args.op: a plain sum
  AlgorithmContext dense;
  dense.transport = context.transport;
  dense.sequence = context.sequence;
  dense.deadline = context.deadline;
  dense.piece_bytes = context.piece_bytes;
  GroupSumScratch scratch(context.scratch);
  if (context.scratch != nullptr) {
    dense.scratch = &scratch;
    dense.transfer_slots = context.scratch->transfer_slots();
  }
  SentTraffic sent;
  const ncclResult_t result =
      ring_allreduce_in_group(args, dense, GroupPhase{&context.group, first_step, &sent});
  if (context.counters != nullptr) {
    context.counters->wire_bytes += sent.bytes;
    context.counters->messages += sent.messages;
  }
  return result;
}

}  // namespace terse
