// What the ways of making a communicator (comm_init.cpp, comm_split_shrink.cpp) share: the
// ncclConfig_t check, and wrap mode's terse side made once the real communicator exists.
#pragma once

#include <nccl.h>

namespace terse {

// Checks an ncclConfig_t. Only `blocking` matters to terse: every call has done its part before
// it returns (host calls completed, device calls enqueued on their streams), so a nonblocking
// communicator is simply one whose calls never return ncclInProgress. The other fields tune NCCL's
// GPU kernels and are accepted and ignored.
ncclResult_t check_config(const ncclConfig_t* config);

// Wrap mode, outside a group: terse's side of `comm`, whose real communicator was just created;
// on failure the real one is aborted, so nothing is left half made.
ncclResult_t finish_wrapped(ncclComm* comm, int fallback_device);

}  // namespace terse
