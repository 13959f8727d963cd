// Where one staged call's buffers go in pinned host memory, and which bytes cross between the
// device and the staging. Pure arithmetic on addresses, tested without a GPU.
//
// The staging mirrors the user's buffers, aliasing included: when the send and receive ranges
// overlap (in place as NCCL defines it: send == recv for allreduce, broadcast, reduce and
// alltoall; send == recv + rank * count for allgather; recv == send + rank * count for
// reduce-scatter; the root's block for gather and scatter) they share one staging region laid
// out as on the device, so the engine sees the same in-place call and takes its in-place route.
// Otherwise each gets its own region. Only inputs are copied in (sendbuff's bytes) and only
// outputs copied out (recvbuff's bytes): the engine writes every byte of a used recvbuff.
#pragma once

#include <cstddef>
#include <cstdint>

namespace terse {

// Staging regions start at multiples of this, as DMA copies prefer.
constexpr size_t kStagingAlignment = 256;

inline size_t align_staging(size_t bytes) {
  return (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}

// One copy between a device buffer and the staging (offsets from the call's staging base).
struct StagingCopy {
  uintptr_t device = 0;
  size_t staging_offset = 0;
  size_t bytes = 0;  // 0: no copy
};

struct StagingLayout {
  size_t bytes = 0;  // staging the call needs, a multiple of kStagingAlignment
  // Where the engine's send and recv pointers point, from the call's staging base (meaningless
  // for a buffer with 0 bytes).
  size_t send_offset = 0;
  size_t recv_offset = 0;
  StagingCopy input;   // device sendbuff -> staging, before the host collective
  StagingCopy output;  // staging -> device recvbuff, after it
};

// The layout for a call that reads `send_bytes` at `send` and writes `recv_bytes` at `recv`
// (0 bytes: the buffer is not used).
StagingLayout plan_staging(uintptr_t send, size_t send_bytes, uintptr_t recv, size_t recv_bytes);

}  // namespace terse
