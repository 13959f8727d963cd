// A communicator's uses (one for the handle, one per call in progress) and its end: finalize,
// destroy and abort; the last use hands it to a closing thread. In wrap mode (comm_mode.h) each
// also acts on the real NCCL's communicator.
#include <mutex>
#include <utility>

#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/background_close.h"
#include "plugin/call_routing.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"

namespace terse {

ncclResult_t finalize_in_order(ncclComm* comm) {
  Communicator* engine = comm->engine.get();
  return run_in_call_order(comm, [engine] { return engine->finalize(); });
}

ncclResult_t acquire_comm(ncclComm* comm, const char* function) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is null", function);
  comm->uses.fetch_add(1);
  if (comm->closing.load()) {
    release_comm(comm);
    return fail(ncclInvalidUsage, "%s: the communicator is being destroyed or aborted", function);
  }
  return ncclSuccess;
}

void release_comm(ncclComm* comm) {
  if (comm->uses.fetch_sub(1) != 1) return;
  // The last use: nobody else holds the struct now.
  const CloseMode mode = comm->aborted.load() ? CloseMode::kAbort : CloseMode::kFlush;
  if (comm->engine || comm->staging) {
    close_in_background(std::move(comm->staging), std::move(comm->engine), mode);
  }
  delete comm;
}

CommUse::CommUse(ncclComm* comm, const char* function)
    : comm_(comm), result_(acquire_comm(comm, function)) {}

CommUse::~CommUse() {
  if (result_ == ncclSuccess) release_comm(comm_);
}

ncclResult_t engine_of(ncclComm* comm, const char* function, Communicator** engine) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is null", function);
  if (!comm->engine) {
    return fail(ncclInvalidUsage,
                "%s: comm is not created: the open group creates it (call ncclGroupEnd first), "
                "or the group that was to create it failed or was discarded (destroy it)",
                function);
  }
  *engine = comm->engine.get();
  return ncclSuccess;
}

}  // namespace terse

using terse::fail;

TERSE_API ncclResult_t ncclCommFinalize(ncclComm_t comm) try {
  TERSE_FORWARD_NESTED(ncclCommFinalize, comm);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommFinalize");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommFinalize", &engine));
  if (comm->real != nullptr) {
    // Inside a group the real NCCL queues it in its own group, as terse does below.
    TERSE_CHECK(terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclCommFinalize, "ncclCommFinalize", comm->real),
        "ncclCommFinalize", comm->real));
  }
  if (terse::api_group_depth() > 0) {
    // Ranks finalized from one thread inside a group flush together at ncclGroupEnd.
    return terse::defer_finalize(comm);
  }
  return terse::finalize_in_order(comm);
} catch (...) {
  return terse::result_of_current_exception("ncclCommFinalize");
}
TERSE_PROFILER_ALIAS(ncclCommFinalize)

// Destroy and abort give up the handle's use of the communicator (nccl_comm.h): the one that
// ends the last use closes it, in the background (background_close.h), so neither waits for
// another thread's call, nor frees what that call still uses.
TERSE_API ncclResult_t ncclCommDestroy(ncclComm_t comm) try {
  TERSE_FORWARD_NESTED(ncclCommDestroy, comm);
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying nothing is fine
  if (comm->closing.exchange(true)) {
    return fail(ncclInvalidUsage, "ncclCommDestroy: comm %p is already destroyed or aborted",
                static_cast<void*>(comm));
  }
  ncclResult_t real_result = ncclSuccess;
  if (comm->real != nullptr) {
    real_result = terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclCommDestroy, "ncclCommDestroy", comm->real),
        "ncclCommDestroy", comm->real);
  }
  // The calls already made on device buffers complete as their streams reach them (NCCL's
  // destroy flushes them too), then the transport closes (or, if broken, aborts).
  terse::release_comm(comm);
  return real_result;
} catch (...) {
  return terse::result_of_current_exception("ncclCommDestroy");
}
TERSE_PROFILER_ALIAS(ncclCommDestroy)

TERSE_API ncclResult_t ncclCommAbort(ncclComm_t comm) try {
  TERSE_FORWARD_NESTED(ncclCommAbort, comm);
  if (comm == nullptr) return ncclSuccess;
  comm->aborted.store(true);
  if (comm->closing.exchange(true)) return ncclSuccess;  // a destroy in progress becomes an abort
  if (comm->real != nullptr) {
    terse::call_real(terse::real_nccl()->ncclCommAbort, "ncclCommAbort", comm->real);
  }
  // Nothing here waits: the proxy starts nothing more, and a call blocked in another thread
  // (collective, split, a finalize's flush) fails at once. The force-close and every join
  // happen when the last use ends, on the closing thread.
  {
    std::lock_guard<std::mutex> lock(comm->staging_mutex);
    if (comm->staging) comm->staging->proxy().stop(terse::StreamProxy::StopMode::kAbandon);
  }
  if (comm->engine) comm->engine->interrupt();
  terse::release_comm(comm);
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommAbort");
}
TERSE_PROFILER_ALIAS(ncclCommAbort)
