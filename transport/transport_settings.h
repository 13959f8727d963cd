// The transport's settings from the environment, read when a communicator is created.
#pragma once

#include <nccl.h>

namespace terse {

// 600 s, the default of torch.distributed for NCCL process groups: long enough that a rank
// legitimately held up (writing a checkpoint, a slow job start) does not kill the job, while a
// dead peer is usually reported much sooner by UCX itself (a reset TCP connection, keepalive).
constexpr int kDefaultTransportTimeoutSeconds = 600;

// TERSE_TIMEOUT_S: the longest any single transport wait may take (bootstrap rendezvous, a UCX
// request, closing endpoints), a positive whole number of seconds. A dead or stuck peer turns
// into an error within it, never a hang.
ncclResult_t transport_timeout_seconds(double* seconds);

// How endpoints learn that a peer failed (TERSE_UCX_ERROR_MODE).
enum class UcxErrorMode {
  // UCP_ERR_HANDLING_MODE_PEER (default): UCX reports a dead peer at once. In UCX 1.13 only
  // transports that can detect peer failure qualify, which excludes shared memory: ranks on one
  // host then talk over TCP loopback (and cma), several times slower than shared memory.
  kPeer,
  // UCP_ERR_HANDLING_MODE_NONE: UCX may use shared memory between ranks on one host; a dead peer
  // is noticed only when a wait reaches its deadline (TERSE_TIMEOUT_S). Also what kPeer falls
  // back to when UCX_TLS leaves no transport that can detect peer failure (e.g. UCX_TLS=shm).
  kNone,
};

// TERSE_UCX_ERROR_MODE = peer | none (default peer).
ncclResult_t ucx_error_mode(UcxErrorMode* mode);

}  // namespace terse
