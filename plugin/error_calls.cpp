// ncclGetErrorString and ncclGetLastError.
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/real_nccl.h"

TERSE_API const char* ncclGetErrorString(ncclResult_t result) {
  if (terse::inside_real_nccl() && terse::real_nccl()->ncclGetErrorString != nullptr) {
    return terse::real_nccl()->ncclGetErrorString(result);
  }
  return terse::result_string(result);
}
TERSE_PROFILER_ALIAS(ncclGetErrorString)

// The calling thread's last error, whatever the communicator: terse records errors per thread
// (common/result.h), and a communicator's own failure is also in the message of the call that
// returned it on this thread. In wrap mode a call the real NCCL failed copies its message there
// (wrapped_comm.h: forwarded).
TERSE_API const char* ncclGetLastError(ncclComm_t comm) {
  if (terse::inside_real_nccl() && terse::real_nccl()->ncclGetLastError != nullptr) {
    return terse::real_nccl()->ncclGetLastError(comm);
  }
  return terse::last_error();
}
TERSE_PROFILER_ALIAS(ncclGetLastError)
