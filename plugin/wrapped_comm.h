// Wrap mode's communicators (comm_mode.h): an ncclComm whose `real` is a real NCCL communicator
// and whose `engine` is terse's UCX side, used only for the allreduces the policy compresses.
#pragma once

#include <nccl.h>

struct ncclComm;

namespace terse {

// Creates `comm->engine` over `comm->real`: waits until the real communicator is ready (a
// nonblocking init), then agrees on a communicator tag and exchanges the UCX workers' addresses
// through it (real_comm_exchange.h). Collective over the real communicator's ranks.
// `fallback_device` is the CUDA device recorded when the real one reports none.
ncclResult_t create_terse_side(ncclComm* comm, int fallback_device);

// Logs (TERSE_DEBUG=INFO) the mode a newly created communicator runs in.
void log_comm_mode(const ncclComm* comm);

// A forwarded call's result: on failure, the real NCCL's last error becomes this thread's,
// prefixed by `function`, so that ncclGetLastError explains it.
ncclResult_t forwarded(ncclResult_t result, const char* function, ncclComm_t real);

// `op` (a raw ncclRedOp_t of `comm`) as the real communicator's operator: built-in ops are the
// same; PreMulSum operators map to the real one created beside terse's. Unknown values pass
// unchanged, for the real NCCL to refuse.
ncclRedOp_t real_op(ncclComm* comm, ncclRedOp_t op);

}  // namespace terse
