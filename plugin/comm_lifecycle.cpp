// Communicator life: version, unique id, init (rank, config, all), split, finalize, destroy,
// abort, and the accessors. In wrap mode (comm_mode.h) each of them also acts on the real NCCL's
// communicator, and the accessors answer from it.
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/exception_guard.h"
#include "common/joining_threads.h"
#include "common/result.h"
#include "plugin/background_close.h"
#include "plugin/call_routing.h"
#include "plugin/comm_mode.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"
#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {
namespace {

constexpr unsigned int kConfigMagic = 0xcafebeef;

// Checks an ncclConfig_t. Only `blocking` matters to terse: every call has done its part before
// it returns (host calls completed, device calls enqueued on their streams), so a nonblocking
// communicator is simply one whose calls never return ncclInProgress. The other fields tune NCCL's
// GPU kernels and are accepted and ignored.
ncclResult_t check_config(const ncclConfig_t* config) {
  if (config == nullptr) return ncclSuccess;
  if (config->magic != kConfigMagic) {
    return fail(ncclInvalidArgument,
                "config has magic 0x%x, not 0x%x: initialise it with NCCL_CONFIG_INITIALIZER",
                config->magic, kConfigMagic);
  }
  const size_t blocking_end = offsetof(ncclConfig_t, blocking) + sizeof(int);
  if (config->size < blocking_end || config->size > (size_t{1} << 16)) {
    return fail(ncclInvalidArgument, "config size %zu is not the size of any ncclConfig_t",
                config->size);
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1) {
    return fail(ncclInvalidArgument, "config blocking %d is neither 0 nor 1", config->blocking);
  }
  return ncclSuccess;
}

// Wrap mode, outside a group: terse's side of `comm`, whose real communicator was just created;
// on failure the real one is aborted, so nothing is left half made.
ncclResult_t finish_wrapped(ncclComm* comm, int fallback_device) {
  const ncclResult_t result = create_terse_side(comm, fallback_device);
  if (result != ncclSuccess) {
    const std::string why = last_error();
    call_real(real_nccl()->ncclCommAbort, "ncclCommAbort", comm->real);
    return fail(result, "%s", why.c_str());
  }
  log_comm_mode(comm);
  return ncclSuccess;
}

ncclResult_t check_init(ncclComm_t* comm, int nranks, int rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "comm (the output pointer) is null");
  if (nranks <= 0) return fail(ncclInvalidArgument, "nranks %d is not positive", nranks);
  if (rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "rank %d is outside [0, nranks %d)", rank, nranks);
  }
  return ncclSuccess;
}

}  // namespace

int current_cuda_device() {
#if TERSE_HAVE_CUDA
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) return device;
  cudaGetLastError();  // no device here: clear the sticky error, terse runs on host memory
#endif
  return -1;
}

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

TERSE_API ncclResult_t ncclGetVersion(int* version) try {
  TERSE_FORWARD_NESTED(ncclGetVersion, version);
  if (version == nullptr) return fail(ncclInvalidArgument, "version is null");
  if (terse::wrap_mode()) {
    // The library the application's calls end up in.
    return terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclGetVersion, "ncclGetVersion", version),
        "ncclGetVersion", nullptr);
  }
  *version = NCCL_VERSION_CODE;  // the API terse implements: the nccl.h it was built against
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclGetVersion");
}
TERSE_PROFILER_ALIAS(ncclGetVersion)

static_assert(sizeof(terse::UniqueId) == sizeof(ncclUniqueId),
              "terse's id (transport/unique_id.h) must fill ncclUniqueId exactly");

TERSE_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) try {
  TERSE_FORWARD_NESTED(ncclGetUniqueId, uniqueId);
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "uniqueId is null");
  terse::CommMode mode = terse::CommMode::kEngine;
  TERSE_CHECK(terse::comm_mode(&mode));
  if (mode == terse::CommMode::kWrap) {
    // The real NCCL's id: its communicator is made first, and terse's side from it.
    return terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclGetUniqueId, "ncclGetUniqueId", uniqueId),
        "ncclGetUniqueId", nullptr);
  }
  terse::UniqueId id;
  TERSE_CHECK(terse::create_unique_id(&id));
  std::memcpy(uniqueId->internal, id.internal, sizeof(id.internal));
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclGetUniqueId");
}
TERSE_PROFILER_ALIAS(ncclGetUniqueId)

TERSE_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t* config) try {
  TERSE_FORWARD_NESTED(ncclCommInitRankConfig, comm, nranks, commId, rank, config);
  TERSE_CHECK(terse::check_init(comm, nranks, rank));
  TERSE_CHECK(terse::check_config(config));
  terse::CommMode mode = terse::CommMode::kEngine;
  TERSE_CHECK(terse::comm_mode(&mode));
  terse::UniqueId id;
  std::memcpy(id.internal, commId.internal, sizeof(id.internal));
  auto created = std::make_unique<ncclComm>();
  if (mode == terse::CommMode::kWrap) {
    TERSE_CHECK(terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclCommInitRankConfig, "ncclCommInitRankConfig",
                         &created->real, nranks, commId, rank, config),
        "ncclCommInitRankConfig", nullptr));
    if (terse::api_group_depth() > 0) {
      // The real communicator exists at the real ncclGroupEnd; terse's side follows it there.
      terse::defer_init({created.get(), id, rank, nranks, terse::current_cuda_device()});
      *comm = created.release();
      return ncclSuccess;
    }
    TERSE_CHECK(terse::finish_wrapped(created.get(), terse::current_cuda_device()));
    *comm = created.release();
    return ncclSuccess;
  }
  if (terse::api_group_depth() > 0) {
    // Ranks initialised from one thread inside a group meet at ncclGroupEnd.
    terse::defer_init({created.get(), id, rank, nranks, terse::current_cuda_device()});
    *comm = created.release();
    return ncclSuccess;
  }
  TERSE_CHECK(terse::Communicator::create(id, rank, nranks, terse::current_cuda_device(),
                                          &created->engine));
  terse::log_comm_mode(created.get());
  *comm = created.release();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommInitRankConfig");
}
TERSE_PROFILER_ALIAS(ncclCommInitRankConfig)

TERSE_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                        int rank) try {
  TERSE_FORWARD_NESTED(ncclCommInitRank, comm, nranks, commId, rank);
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
} catch (...) {
  return terse::result_of_current_exception("ncclCommInitRank");
}
TERSE_PROFILER_ALIAS(ncclCommInitRank)

// All ranks in this process, one thread each (their rendezvous needs them all at once).
// devlist[i] (or i without a list, as NCCL numbers them) is rank i's CUDA device: what
// ncclCommCuDevice reports and the device its device buffers must be on. Host buffers work
// whatever it says, so InitAll(n) runs on machines with fewer than n GPUs (or none).
TERSE_API ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) try {
  TERSE_FORWARD_NESTED(ncclCommInitAll, comm, ndev, devlist);
  if (comm == nullptr) return fail(ncclInvalidArgument, "comm (the output array) is null");
  if (ndev <= 0) return fail(ncclInvalidArgument, "ndev %d is not positive", ndev);
  terse::CommMode mode = terse::CommMode::kEngine;
  TERSE_CHECK(terse::comm_mode(&mode));
  terse::UniqueId id;
  if (mode == terse::CommMode::kEngine) TERSE_CHECK(terse::create_unique_id_with_own_root(&id));
  std::vector<std::unique_ptr<ncclComm>> comms(ndev);
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::string> messages(ndev);
  for (int rank = 0; rank < ndev; ++rank) comms[rank] = std::make_unique<ncclComm>();
  if (mode == terse::CommMode::kWrap) {
    std::vector<ncclComm_t> reals(ndev);
    TERSE_CHECK(terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommInitAll,
                                                  "ncclCommInitAll", reals.data(), ndev, devlist),
                                 "ncclCommInitAll", nullptr));
    for (int rank = 0; rank < ndev; ++rank) comms[rank]->real = reals[rank];
  }
  terse::JoiningThreads threads(ndev);
  for (int rank = 0; rank < ndev; ++rank) {
    threads.start([&, rank] {
      const int device = devlist ? devlist[rank] : rank;
      results[rank] = terse::call_guarded(
          "ncclCommInitAll",
          [&] {
            if (comms[rank]->real != nullptr) {
              return terse::create_terse_side(comms[rank].get(), device);
            }
            return terse::Communicator::create(id, rank, ndev, device, &comms[rank]->engine);
          },
          &messages[rank]);
    });
  }
  threads.join();
  for (int rank = 0; rank < ndev; ++rank) {
    if (results[rank] != ncclSuccess) {
      for (auto& made : comms) {
        if (made->real != nullptr) {
          terse::call_real(terse::real_nccl()->ncclCommAbort, "ncclCommAbort", made->real);
        }
      }
      return fail(results[rank], "ncclCommInitAll: rank %d of %d failed: %s", rank, ndev,
                  messages[rank].c_str());
    }
  }
  for (int rank = 0; rank < ndev; ++rank) {
    terse::log_comm_mode(comms[rank].get());
    comm[rank] = comms[rank].release();
  }
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommInitAll");
}
TERSE_PROFILER_ALIAS(ncclCommInitAll)

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
