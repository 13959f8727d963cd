// TERSE_MODE=auto|wrap|engine: whose communicators an application's calls run on (docs/design.md
// section 1).
//
// - engine: every call on terse's own engine (UCX), also when a real NCCL is loaded.
// - wrap: every terse communicator keeps a real NCCL communicator (real_nccl.h); the calls the
//   policy leaves alone go to it, and only the allreduces the policy compresses run on terse's
//   UCX side, whose peers' addresses are exchanged through the real communicator (wrapped_comm.h).
// - auto (the default): wrap when a real NCCL is found and a CUDA device is present, else engine.
//
// Decided once per process, at the first call that needs it (ncclGetUniqueId must already know
// whose id to return, before any communicator exists), and the same for every communicator.
#pragma once

#include <nccl.h>

namespace terse {

enum class CommMode { kEngine, kWrap };

// The process's mode; a bad TERSE_MODE fails with ncclInvalidArgument naming it, wrap without a
// real NCCL with ncclInvalidUsage naming TERSE_MODE and TERSE_NCCL_LIBRARY (every call that asks
// gets the same answer).
ncclResult_t comm_mode(CommMode* mode);

// Whether the process runs in wrap mode (false when the mode is engine or could not be decided).
bool wrap_mode();

const char* comm_mode_name(CommMode mode);

}  // namespace terse
