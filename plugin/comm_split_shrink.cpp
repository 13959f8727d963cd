// New communicators from an existing one: split, shrink (the remaining ranks alone), and revoke,
// which ends the call in flight (after it only split, shrink and destroy). In wrap mode
// (comm_mode.h) each also acts on the real NCCL's communicator.
#include <memory>
#include <vector>

#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/call_routing.h"
#include "plugin/comm_creation.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"

using terse::fail;

TERSE_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                     ncclConfig_t* config) try {
  TERSE_FORWARD_NESTED(ncclCommSplit, comm, color, key, newcomm, config);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommSplit");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommSplit", &engine));
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "newcomm is null");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return fail(ncclInvalidArgument, "color %d is negative and not NCCL_SPLIT_NOCOLOR", color);
  }
  TERSE_CHECK(terse::check_config(config));
  auto created = std::make_unique<ncclComm>();
  if (comm->real != nullptr) {
    // The real communicator splits; terse's side of each part is made from its real one.
    TERSE_CHECK(
        terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommSplit, "ncclCommSplit",
                                          comm->real, color, key, &created->real, config),
                         "ncclCommSplit", comm->real));
    if (created->real == nullptr) {
      *newcomm = nullptr;  // NCCL_SPLIT_NOCOLOR
      return ncclSuccess;
    }
    TERSE_CHECK(terse::finish_wrapped(created.get(), engine->cuda_device()));
    *newcomm = created.release();
    return ncclSuccess;
  }
  // After every call already made on comm (its device calls may still wait for their streams).
  TERSE_CHECK(
      terse::run_in_call_order(comm, [&] { return engine->split(color, key, &created->engine); }));
  // NCCL_SPLIT_NOCOLOR: no communicator for this rank.
  terse::log_comm_mode(created.get());
  *newcomm = created->engine ? created.release() : nullptr;
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommSplit");
}
TERSE_PROFILER_ALIAS(ncclCommSplit)

TERSE_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                      ncclComm_t* newcomm, ncclConfig_t* config,
                                      int shrinkFlags) try {
  TERSE_FORWARD_NESTED(ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config,
                       shrinkFlags);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommShrink");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommShrink", &engine));
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "newcomm is null");
  *newcomm = nullptr;
  if (excludeRanksCount < 0) {
    return fail(ncclInvalidArgument, "excludeRanksCount %d is negative", excludeRanksCount);
  }
  if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
    return fail(ncclInvalidArgument, "excludeRanksList is null but excludeRanksCount is %d",
                excludeRanksCount);
  }
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return fail(ncclInvalidArgument,
                "shrinkFlags %d is neither NCCL_SHRINK_DEFAULT (%d) nor NCCL_SHRINK_ABORT (%d)",
                shrinkFlags, NCCL_SHRINK_DEFAULT, NCCL_SHRINK_ABORT);
  }
  TERSE_CHECK(terse::check_config(config));
  const std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
  const bool abort_first = shrinkFlags == NCCL_SHRINK_ABORT;
  auto created = std::make_unique<ncclComm>();
  if (comm->real != nullptr) {
    // The real communicator shrinks; terse's side of the new one is made from it, by the
    // remaining ranks alone. Terse's side of the old one is revoked first when asked to abort,
    // so that a compressed call stuck on a dead rank ends too.
    if (abort_first) TERSE_CHECK(engine->revoke());
    TERSE_CHECK(terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclCommShrink, "ncclCommShrink", comm->real,
                         excludeRanksList, excludeRanksCount, &created->real, config, shrinkFlags),
        "ncclCommShrink", comm->real));
    if (created->real == nullptr) {
      return fail(ncclInternalError, "ncclCommShrink: the real NCCL returned no communicator");
    }
    TERSE_CHECK(terse::finish_wrapped(created.get(), engine->cuda_device()));
    *newcomm = created.release();
    return ncclSuccess;
  }
  if (abort_first) {
    // At once, not in call order: the calls before it may be what hangs on the dead rank.
    TERSE_CHECK(engine->revoke());
  }
  TERSE_CHECK(terse::run_in_call_order(
      comm, [&] { return engine->shrink(excluded, /*abort_first=*/false, &created->engine); }));
  terse::log_comm_mode(created.get());
  *newcomm = created.release();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommShrink");
}
TERSE_PROFILER_ALIAS(ncclCommShrink)

TERSE_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) try {
  TERSE_FORWARD_NESTED(ncclCommRevoke, comm, revokeFlags);
  terse::Communicator* engine = nullptr;
  terse::CommUse use(comm, "ncclCommRevoke");
  TERSE_CHECK(use.result());
  TERSE_CHECK(terse::engine_of(comm, "ncclCommRevoke", &engine));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    return fail(ncclInvalidArgument, "revokeFlags %d is not NCCL_REVOKE_DEFAULT (%d)", revokeFlags,
                NCCL_REVOKE_DEFAULT);
  }
  if (comm->real != nullptr) {
    TERSE_CHECK(terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommRevoke,
                                                  "ncclCommRevoke", comm->real, revokeFlags),
                                 "ncclCommRevoke", comm->real));
  }
  // Returns once terse's side is quiescent, so ncclCommGetAsyncError says ncclSuccess at once
  // (NCCL allows ncclInProgress until then).
  return engine->revoke();
} catch (...) {
  return terse::result_of_current_exception("ncclCommRevoke");
}
TERSE_PROFILER_ALIAS(ncclCommRevoke)
