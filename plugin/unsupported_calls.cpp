// The rest of nccl.h, so that an application that names them still links against libterse:
// ncclCommInitRankScalable works (every rank receives the same id array, so the first id names
// one rendezvous for all); the calls terse does not implement yet fail with ncclInvalidUsage
// and say so. In wrap mode (comm_mode.h) the symmetric-memory windows are the real NCCL's (they
// serve its kernels only). (Shrink and revoke: comm_split_shrink.cpp; ncclGroupSimulateEnd:
// group_calls.cpp.)
#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"

using terse::fail;

TERSE_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                int nId, ncclUniqueId* commIds,
                                                ncclConfig_t* config) try {
  TERSE_FORWARD_NESTED(ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
  if (commIds == nullptr) return fail(ncclInvalidArgument, "commIds is null");
  if (nId <= 0) return fail(ncclInvalidArgument, "nId %d is not positive", nId);
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
} catch (...) {
  return terse::result_of_current_exception("ncclCommInitRankScalable");
}
TERSE_PROFILER_ALIAS(ncclCommInitRankScalable)

TERSE_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size,
                                              ncclWindow_t* win, int winFlags) try {
  TERSE_FORWARD_NESTED(ncclCommWindowRegister, comm, buff, size, win, winFlags);
  terse::Communicator* engine = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "ncclCommWindowRegister", &engine));
  if (comm->real != nullptr) {
    return terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclCommWindowRegister, "ncclCommWindowRegister",
                         comm->real, buff, size, win, winFlags),
        "ncclCommWindowRegister", comm->real);
  }
  return fail(ncclInvalidUsage, "ncclCommWindowRegister is not supported by terse yet");
} catch (...) {
  return terse::result_of_current_exception("ncclCommWindowRegister");
}
TERSE_PROFILER_ALIAS(ncclCommWindowRegister)

TERSE_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) try {
  TERSE_FORWARD_NESTED(ncclCommWindowDeregister, comm, win);
  terse::Communicator* engine = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "ncclCommWindowDeregister", &engine));
  if (comm->real != nullptr) {
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommWindowDeregister,
                                             "ncclCommWindowDeregister", comm->real, win),
                            "ncclCommWindowDeregister", comm->real);
  }
  return fail(ncclInvalidUsage, "ncclCommWindowDeregister is not supported by terse yet");
} catch (...) {
  return terse::result_of_current_exception("ncclCommWindowDeregister");
}
TERSE_PROFILER_ALIAS(ncclCommWindowDeregister)
