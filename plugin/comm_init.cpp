// A communicator made: version, unique id, init (rank, config, all), with the checks every way of
// making one shares (comm_creation.h). In wrap mode (comm_mode.h) each also acts on the real NCCL.
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/exception_guard.h"
#include "common/joining_threads.h"
#include "common/result.h"
#include "plugin/call_routing.h"
#include "plugin/comm_creation.h"
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

ncclResult_t check_init(ncclComm_t* comm, int nranks, int rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "comm (the output pointer) is null");
  if (nranks <= 0) return fail(ncclInvalidArgument, "nranks %d is not positive", nranks);
  if (rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "rank %d is outside [0, nranks %d)", rank, nranks);
  }
  return ncclSuccess;
}

}  // namespace

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

int current_cuda_device() {
#if TERSE_HAVE_CUDA
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) return device;
  cudaGetLastError();  // no device here: clear the sticky error, terse runs on host memory
#endif
  return -1;
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
