// Send and receive: one message each, whatever its size (UCX moves large ones zero-copy), so
// nothing is staged. context.sequence is the per-peer message number the communicator keeps
// (operation_numbers.h), so the n-th send to a peer meets that peer's n-th receive. Groups post
// several of these together through the communicator instead (communicator.h, run_batch).
#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {

ncclResult_t run_direct_send(const CollectiveArgs& args, const AlgorithmContext& context) {
  const size_t bytes = args.count * nccl_type_size(args.type);
  InFlightTransfers transfers(context.transport, 1, context.deadline);
  TERSE_CHECK(transfers.send(0, args.peer, make_operation(context.sequence, 0), args.send, bytes));
  return transfers.wait_all();
}

ncclResult_t run_direct_recv(const CollectiveArgs& args, const AlgorithmContext& context) {
  const size_t bytes = args.count * nccl_type_size(args.type);
  InFlightTransfers transfers(context.transport, 1, context.deadline);
  TERSE_CHECK(transfers.recv(0, args.peer, make_operation(context.sequence, 0), args.recv, bytes));
  return transfers.wait_all();
}

}  // namespace terse
