// The transport's settings from the environment, read when a communicator is created.
#pragma once

#include "common/result.h"

namespace terse {

// 600 s, the default of torch.distributed for NCCL process groups: long enough that a rank
// legitimately held up (writing a checkpoint, a slow job start) does not kill the job, while a
// dead peer is usually reported much sooner by UCX itself (a reset TCP connection, keepalive).
constexpr int kDefaultTransportTimeoutSeconds = 600;

// TERSE_TIMEOUT_S: the longest any single transport wait may take (bootstrap rendezvous, a UCX
// request, closing endpoints), a positive whole number of seconds. A dead or stuck peer turns
// into an error within it, never a hang.
Result transport_timeout_seconds(double* seconds);

// How endpoints learn that a peer failed (TERSE_UCX_ERROR_MODE).
enum class UcxErrorMode {
  // UCP_ERR_HANDLING_MODE_PEER: UCX reports a dead peer at once. In UCX 1.13 only transports
  // that can detect peer failure qualify, which excludes shared memory: ranks on one host then
  // talk over TCP loopback (and cma), several times slower than shared memory.
  kPeer,
  // UCP_ERR_HANDLING_MODE_NONE: UCX may use shared memory. UCX reports nothing about a dead
  // peer; the transport watches processes on its own host itself (process_identity.h) and the
  // deadline (TERSE_TIMEOUT_S) catches the rest. Also what kPeer falls back to when UCX_TLS
  // leaves no transport that can detect peer failure (e.g. UCX_TLS=shm).
  kNone,
};

// TERSE_UCX_ERROR_MODE, the mode of each endpoint:
enum class UcxErrorModeSetting {
  // auto (default): kNone to ranks on this host (same host identity) whose process this rank
  // can watch (same boot id and PID namespace), so they share memory; kPeer to the others.
  kAuto,
  kPeer,  // peer: kPeer to every rank
  kNone,  // none: kNone to every rank; ranks elsewhere are caught only at the deadline
};

// TERSE_UCX_ERROR_MODE = auto | peer | none (default auto).
Result ucx_error_mode(UcxErrorModeSetting* setting);

}  // namespace terse
