// Turns a user's ncclRedOp_t into the engine's ReduceOp (collectives/reduction.h).
#pragma once

#include <nccl.h>

#include "collectives/reduction.h"
#include "plugin/nccl_comm.h"

namespace terse {

// Built-in ops map directly (ncclAvg: floats scale each input by 1/nranks, integers divide the
// sum); values from ncclRedOpCreatePreMulSum on `comm` scale each input by their scalar and
// must be used with the datatype they were created for. `op` is taken as a raw int so that
// values outside the enum are checked, not assumed.
ncclResult_t resolve_reduce_op(ncclComm* comm, int op, ncclDataType_t type, int nranks,
                               ReduceOp* out);

}  // namespace terse
