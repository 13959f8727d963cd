// ncclGetErrorString and ncclGetLastError.
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/real_nccl.h"

// The lower layers' terse::Result converts to and from ncclResult_t by number (common/result.h):
// the numbers must be NCCL's.
static_assert(terse::Result::kSuccess == ncclSuccess && terse::Result::kSuccess.code() == 0);
static_assert(terse::Result::kUnhandledCudaError == ncclUnhandledCudaError);
static_assert(terse::Result::kSystemError == ncclSystemError);
static_assert(terse::Result::kInternalError == ncclInternalError);
static_assert(terse::Result::kInvalidArgument == ncclInvalidArgument);
static_assert(terse::Result::kInvalidUsage == ncclInvalidUsage);
static_assert(terse::Result::kRemoteError == ncclRemoteError);
static_assert(terse::Result::kInProgress == ncclInProgress);
static_assert(ncclNumResults == 8, "a code NCCL added needs its terse::Result constant");

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
