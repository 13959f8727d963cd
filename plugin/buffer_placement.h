// Where a call's buffers live, and what that decides: host memory runs on the engine at once
// (terse's host path, completed on return), device memory is staged through pinned host memory
// in stream order (device_staging.h). Pure functions, so the rules are tested without a GPU;
// what CUDA says about a pointer comes from pointer_memory.h.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "collectives/collective_args.h"

namespace terse {

// One buffer as far as terse cares.
enum class BufferKind {
  // Pageable, pinned or registered host memory, or an address CUDA does not know (no GPU, no
  // CUDA build): the host reads and writes it directly.
  kHost,
  // cudaMalloc memory of `device`.
  kDevice,
  // cudaMallocManaged memory. The host could touch it, but the kernels that produce it may still
  // be running on the stream, so it is staged in stream order like device memory. Any device can
  // reach it, so its device is not compared with the communicator's.
  kManaged,
};

struct BufferMemory {
  BufferKind kind = BufferKind::kHost;
  int device = -1;  // kDevice and kManaged: the device CUDA reports
};

// Which buffers this rank reads (send) or writes (recv) in a call with count > 0. NCCL ignores
// sendbuff off the root of a broadcast or scatter and recvbuff off the root of a reduce or
// gather (they may be null or anything); send has no recvbuff and recv no sendbuff.
struct BuffersUsed {
  bool send = false;
  bool recv = false;
};
BuffersUsed buffers_used(CollectiveKind kind, int rank, int root);

// Bytes of each buffer this rank uses in `args` (0 for one it does not use), as NCCL sizes
// them: allgather/gather outputs and reduce-scatter/scatter inputs hold nranks blocks, alltoall
// both. The arguments must have passed Communicator::check_arguments (no overflow).
struct BufferBytes {
  size_t send = 0;
  size_t recv = 0;
};
BufferBytes buffer_bytes(const CollectiveArgs& args, int rank, int nranks);

enum class CallPath { kHost, kDevice };

// Why a call's buffers were refused.
enum class PlacementRefusal {
  kNone,
  kMixed,        // one used buffer is host memory, the other device or managed memory
  kOtherDevice,  // device memory of a device other than the communicator's
  kNoDevice,     // device memory, but the communicator has no CUDA device
};

struct PathChoice {
  CallPath path = CallPath::kHost;
  PlacementRefusal refusal = PlacementRefusal::kNone;
  // The refused buffer: "sendbuff" or "recvbuff" (null when accepted). For kMixed, the one in
  // host memory.
  const char* argument = nullptr;
};

// The path of a call from the memory of the buffers it uses (`send`/`recv` are ignored where
// `used` says the rank does not use them): all host -> kHost; all device or managed on the
// communicator's device (`comm_device`, -1 for none) -> kDevice; otherwise a refusal. A call
// that uses no buffer (count 0) takes the host path.
PathChoice choose_path(const BuffersUsed& used, const BufferMemory& send, const BufferMemory& recv,
                       int comm_device);

// "host memory", "device memory" or "managed memory", for messages.
const char* buffer_kind_name(BufferKind kind);

}  // namespace terse
