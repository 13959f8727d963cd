// What a communicator answers: its asynchronous error, size, rank and CUDA device. In wrap mode
// (comm_mode.h) the real NCCL's communicator answers, its error first.
#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"

using terse::fail;

TERSE_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) try {
  TERSE_FORWARD_NESTED(ncclCommGetAsyncError, comm, asyncError);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommGetAsyncError");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommGetAsyncError", &engine));
  if (asyncError == nullptr) return fail(ncclInvalidArgument, "asyncError is null");
  if (comm->real != nullptr) {
    // Either side's error breaks the communicator; the real side's comes first.
    TERSE_CHECK(terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommGetAsyncError,
                                                  "ncclCommGetAsyncError", comm->real, asyncError),
                                 "ncclCommGetAsyncError", comm->real));
    if (*asyncError != ncclSuccess) return ncclSuccess;
  }
  *asyncError = engine->async_error();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommGetAsyncError");
}
TERSE_PROFILER_ALIAS(ncclCommGetAsyncError)

TERSE_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) try {
  TERSE_FORWARD_NESTED(ncclCommCount, comm, count);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommCount");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommCount", &engine));
  if (count == nullptr) return fail(ncclInvalidArgument, "count is null");
  if (comm->real != nullptr) {
    return terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclCommCount, "ncclCommCount", comm->real, count),
        "ncclCommCount", comm->real);
  }
  *count = engine->nranks();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommCount");
}
TERSE_PROFILER_ALIAS(ncclCommCount)

TERSE_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) try {
  TERSE_FORWARD_NESTED(ncclCommUserRank, comm, rank);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommUserRank");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommUserRank", &engine));
  if (rank == nullptr) return fail(ncclInvalidArgument, "rank is null");
  if (comm->real != nullptr) {
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommUserRank,
                                             "ncclCommUserRank", comm->real, rank),
                            "ncclCommUserRank", comm->real);
  }
  *rank = engine->rank();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommUserRank");
}
TERSE_PROFILER_ALIAS(ncclCommUserRank)

TERSE_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) try {
  TERSE_FORWARD_NESTED(ncclCommCuDevice, comm, device);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommCuDevice");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommCuDevice", &engine));
  if (device == nullptr) return fail(ncclInvalidArgument, "device is null");
  if (comm->real != nullptr) {
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommCuDevice,
                                             "ncclCommCuDevice", comm->real, device),
                            "ncclCommCuDevice", comm->real);
  }
  *device = engine->cuda_device();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommCuDevice");
}
TERSE_PROFILER_ALIAS(ncclCommCuDevice)
