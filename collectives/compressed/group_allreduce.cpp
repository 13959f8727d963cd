#include "collectives/compressed/group_allreduce.h"

#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {

ncclResult_t group_allreduce_sum(float* values, size_t count, const CompressedContext& context,
                                 uint32_t first_step, float* scratch) {
  const PeerGroup& group = context.group;
  const int n = group.size();
  if (n <= 1 || count == 0) return ncclSuccess;
  const RingPattern ring(group.index, n);
  const int next = group.rank_at(ring.next());
  const int previous = group.rank_at(ring.previous());
  // Slot 0: the send of the step, slot 1: its receive; a step finishes before the next starts,
  // so the neighbours' messages of different steps never wait on each other.
  InFlightTransfers transfers(context.transport, 2, context.deadline);
  for (int step = 0; step < 2 * ring.steps(); ++step) {
    const bool reducing = step < ring.steps();
    const int s = reducing ? step : step - ring.steps();
    const ElementRange sent = ring.block(
        count, reducing ? ring.reduce_scatter_send_block(s) : ring.allgather_send_block(s));
    const ElementRange received = ring.block(
        count, reducing ? ring.reduce_scatter_recv_block(s) : ring.allgather_recv_block(s));
    const uint32_t operation =
        make_operation(context.sequence, first_step + static_cast<uint32_t>(step));
    float* landing = reducing ? scratch : values + received.offset;
    TERSE_CHECK(transfers.recv(1, previous, operation, landing, received.count * sizeof(float)));
    TERSE_CHECK(
        transfers.send(0, next, operation, values + sent.offset, sent.count * sizeof(float)));
    count_sent(context, sent.count * sizeof(float));
    TERSE_CHECK(transfers.wait(1));
    if (reducing) {
      float* target = values + received.offset;
      for (size_t i = 0; i < received.count; ++i) target[i] += scratch[i];
    }
    TERSE_CHECK(transfers.wait(0));
  }
  return ncclSuccess;
}

}  // namespace terse
