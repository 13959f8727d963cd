// What one collective call asks for, in the form every algorithm takes. The plugin validates a
// user's call and fills this; the communicator assigns the operation sequence and runs the
// algorithm the selector picked. Buffers are host memory here (device buffers are staged
// through pinned host memory by the API layer, plugin/device_staging.h, before the engine sees
// them), except for an allreduce that comes with `device` (device_buffers.h).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/reduction.h"
#include "transport/deadline.h"

namespace terse {

class Transport;
class DeviceBuffers;
class ScratchLender;  // algorithm_scratch.h
class TransferSlots;  // in_flight_transfers.h

// What terseAllReduceTensor says about a tensor (include/terse/terse.h: terseTensor).
struct TensorRequest {
  std::string name;            // "" for anonymous
  std::vector<int64_t> shape;  // outermost first; empty for none
  std::string codec;           // per-call codec override; "" to let the policy decide
};

enum class CollectiveKind {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
};

const char* collective_name(CollectiveKind kind);

struct CollectiveArgs {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements per rank as NCCL counts them: allreduce/broadcast/reduce the whole buffer;
  // allgather/gather the per-rank send count; reduce-scatter/scatter the per-rank recv count;
  // alltoall the count exchanged with each peer; send/recv the message.
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ReduceOp op;
  int root = 0;  // broadcast, reduce, gather, scatter
  int peer = 0;  // send, recv

  // Allreduce only, for the compression policy (compression_engine.h): what the application
  // said about the tensor (terseAllReduceTensor; null for ncclAllReduce), and the address that
  // identifies an anonymous tensor: the user's recvbuff, which the API layer keeps here when it
  // stages device buffers through host memory (0: `recv`).
  std::shared_ptr<const TensorRequest> tensor;
  uint64_t tensor_address = 0;
  // Allreduce only: non-null when send and recv are device memory (device_buffers.h says where
  // the engine then runs the call). Null: host memory.
  DeviceBuffers* device = nullptr;
};

// What an algorithm runs with: one rank's transport, the operation number that keeps its
// messages apart from every other operation's (tag_layout.h: make_operation(sequence, step)),
// and the deadline after which it gives up with ncclRemoteError.
//
// `piece_bytes` is how large a pipeline piece may be (TERSE_PIECE_BYTES, read by the
// communicator; default kDefaultPieceBytes): algorithms cut big messages into pieces of at most
// this many bytes so several are in flight and temporary memory stays a few pieces.
constexpr size_t kDefaultPieceBytes = size_t{1} << 20;

struct AlgorithmContext {
  Transport* transport = nullptr;
  uint32_t sequence = 0;
  Deadline deadline = Deadline::at({});  // already expired; set by the communicator
  size_t piece_bytes = kDefaultPieceBytes;
  // Where the algorithm's temporary memory comes from (AlgorithmScratch): memory its caller
  // keeps across calls (a compressed call's scratch, for the dense sums it runs as phases), or
  // null for the per-thread buffer.
  ScratchLender* scratch = nullptr;
  // Request slots the caller keeps across calls, for an algorithm whose transfers outnumber
  // InFlightTransfers::kInlineSlots (the ring's pipeline); null: such an algorithm allocates its
  // own.
  TransferSlots* transfer_slots = nullptr;
};

// Elements of `type` in one pipeline piece (at least 1).
inline size_t piece_elements(const AlgorithmContext& context, ncclDataType_t type) {
  const size_t element_bytes = nccl_type_size(type);
  const size_t elements = element_bytes == 0 ? 0 : context.piece_bytes / element_bytes;
  return elements == 0 ? 1 : elements;
}

}  // namespace terse
