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
//
// `*device_scalar` is set (else null) when the scalar is ncclScalarDevice memory on the device:
// the host cannot read it now, so the caller stages it with the call's inputs and sets
// `out->input_scale` from the staged copy (premul_scalar_value) when the call runs.
ncclResult_t resolve_reduce_op(ncclComm* comm, int op, ncclDataType_t type, int nranks,
                               ReduceOp* out, const void** device_scalar);

// One element of `type` at `scalar` (host memory), as a double.
double premul_scalar_value(ncclDataType_t type, const void* scalar);

}  // namespace terse
