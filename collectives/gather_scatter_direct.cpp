// Gather and scatter, directly: every rank's block goes straight between it and the root, all
// messages posted at once and waited together. The root's link carries (n-1)/n of the data
// whatever the algorithm, so a tree would only add hops; UCX moves large blocks zero-copy, so
// there is nothing to stage and no memory besides the buffers.
//
// In place, as NCCL defines it: gather with send == recv + root * count at the root, scatter
// with recv == send + root * count at the root; the root's own block is then already in place.
#include <cstring>

#include "collectives/collective_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {

ncclResult_t run_direct_gather(const CollectiveArgs& args, const AlgorithmContext& context) {
  Transport& transport = *context.transport;
  const int rank = transport.rank(), nranks = transport.nranks();
  const size_t block_bytes = args.count * nccl_type_size(args.type);
  if (block_bytes == 0) return ncclSuccess;
  const uint32_t operation = make_operation(context.sequence, 0);
  if (rank != args.root) {
    InFlightTransfers transfers(&transport, 1, context.deadline);
    TERSE_CHECK(transfers.send(0, args.root, operation, args.send, block_bytes));
    return transfers.wait_all();
  }
  uint8_t* recv = static_cast<uint8_t*>(args.recv);
  uint8_t* own = recv + static_cast<size_t>(rank) * block_bytes;
  if (args.send != own) std::memcpy(own, args.send, block_bytes);
  InFlightTransfers transfers(&transport, static_cast<size_t>(nranks), context.deadline);
  for (int peer = 0; peer < nranks; ++peer) {
    if (peer == rank) continue;
    TERSE_CHECK(transfers.recv(static_cast<size_t>(peer), peer, operation,
                               recv + static_cast<size_t>(peer) * block_bytes, block_bytes));
  }
  return transfers.wait_all();
}

ncclResult_t run_direct_scatter(const CollectiveArgs& args, const AlgorithmContext& context) {
  Transport& transport = *context.transport;
  const int rank = transport.rank(), nranks = transport.nranks();
  const size_t block_bytes = args.count * nccl_type_size(args.type);
  if (block_bytes == 0) return ncclSuccess;
  const uint32_t operation = make_operation(context.sequence, 0);
  if (rank != args.root) {
    InFlightTransfers transfers(&transport, 1, context.deadline);
    TERSE_CHECK(transfers.recv(0, args.root, operation, args.recv, block_bytes));
    return transfers.wait_all();
  }
  const uint8_t* send = static_cast<const uint8_t*>(args.send);
  const uint8_t* own = send + static_cast<size_t>(rank) * block_bytes;
  if (args.recv != own) std::memcpy(args.recv, own, block_bytes);
  InFlightTransfers transfers(&transport, static_cast<size_t>(nranks), context.deadline);
  // Starting after the root spreads the first messages' arrival over the ranks' links.
  for (int i = 1; i < nranks; ++i) {
    const int peer = (rank + i) % nranks;
    TERSE_CHECK(transfers.send(static_cast<size_t>(peer), peer, operation,
                               send + static_cast<size_t>(peer) * block_bytes, block_bytes));
  }
  return transfers.wait_all();
}

}  // namespace terse
