// ncclGetErrorString and ncclGetLastError.
#include "common/result.h"
#include "plugin/nccl_api.h"

TERSE_API const char* ncclGetErrorString(ncclResult_t result) {
  return terse::result_string(result);
}
TERSE_PROFILER_ALIAS(ncclGetErrorString)

// The calling thread's last error, whatever the communicator: terse records errors per thread
// (common/result.h), and a communicator's own failure is also in the message of the call that
// returned it on this thread.
TERSE_API const char* ncclGetLastError(ncclComm_t /*comm*/) {
  return terse::last_error();
}
TERSE_PROFILER_ALIAS(ncclGetLastError)
