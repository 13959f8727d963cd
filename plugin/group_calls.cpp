// ncclGroupStart / ncclGroupEnd: the group's calls are queued and run by call_routing.h (host
// buffers through the engine's groups, collectives/group.h; device buffers through staging);
// communicators initialised inside the group are created at the outermost ncclGroupEnd before
// the calls run, and communicators finalized inside it are finalized after. In wrap mode
// (comm_mode.h) every group is also a group of the real NCCL's, holding the calls forwarded to
// it; the real ncclGroupEnd runs first (creating the real communicators of the group's inits,
// whose terse sides are made from them next), then terse's part of the group.
//
// ncclGroupSimulateEnd ends a group as ncclGroupEnd does, but its collectives and sends and
// receives are discarded instead of run (call_routing.h: simulate_api_group), and simInfo's
// estimatedTime (microseconds) is the sum of the cost model's predictions for them. Inits and
// finalizes inside it are carried out, as NCCL carries out its group's other jobs. In wrap mode
// the real ncclGroupSimulateEnd simulates the real NCCL's part first, and terse adds its own
// part's prediction to the estimate it gave.
#include <string>
#include <thread>
#include <vector>

#include "common/exception_guard.h"
#include "common/joining_threads.h"
#include "common/result.h"
#include "plugin/call_routing.h"
#include "plugin/comm_mode.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"

namespace terse {
namespace {

std::vector<PendingInit>& pending_inits() {
  thread_local std::vector<PendingInit> pending;
  return pending;
}

std::vector<ncclComm*>& pending_finalizes() {
  thread_local std::vector<ncclComm*> pending;
  return pending;
}

// Each pending finalize holds a use of its communicator (taken by ncclCommFinalize), given
// up here once it has run.
ncclResult_t run_pending_finalizes(std::vector<ncclComm*> comms) {
  struct ReleaseUses {
    std::vector<ncclComm*>* comms;
    ~ReleaseUses() {
      for (ncclComm* comm : *comms) release_comm(comm);
    }
  } release{&comms};
  std::vector<ncclResult_t> results(comms.size(), ncclSuccess);
  std::vector<std::string> messages(comms.size());
  JoiningThreads threads(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    threads.start([&, i] {
      results[i] = call_guarded(
          "ncclGroupEnd (finalize)", [&] { return finalize_in_order(comms[i]); }, &messages[i]);
    });
  }
  threads.join();
  for (size_t i = 0; i < comms.size(); ++i) {
    if (results[i] != ncclSuccess) {
      return fail(results[i], "ncclGroupEnd: ncclCommFinalize of rank %d failed: %s",
                  comms[i]->engine->rank(), messages[i].c_str());
    }
  }
  return ncclSuccess;
}

// Creates every pending communicator, each on its own thread (they may be ranks of one
// communicator, which rendezvous together). Returns the first failure.
ncclResult_t run_pending_inits(std::vector<PendingInit> inits) {
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  std::vector<std::string> messages(inits.size());
  JoiningThreads threads(inits.size());
  for (size_t i = 0; i < inits.size(); ++i) {
    threads.start([&, i] {
      const PendingInit& init = inits[i];
      results[i] = call_guarded(
          "ncclGroupEnd (init)",
          [&] {
            if (init.comm->real != nullptr) return create_terse_side(init.comm, init.cuda_device);
            return Communicator::create(init.id, init.rank, init.nranks, init.cuda_device,
                                        &init.comm->engine);
          },
          &messages[i]);
    });
  }
  threads.join();
  for (size_t i = 0; i < inits.size(); ++i) {
    if (results[i] != ncclSuccess) {
      return fail(results[i], "ncclGroupEnd: ncclCommInitRank of rank %d of %d failed: %s",
                  inits[i].rank, inits[i].nranks, messages[i].c_str());
    }
  }
  for (const PendingInit& init : inits) log_comm_mode(init.comm);
  return ncclSuccess;
}

// NCCL_SIM_INFO_INITIALIZER's magic (nccl.h spells it as a literal there).
constexpr unsigned int kSimInfoMagic = 0x74685283;

// A simInfo the caller initialised with NCCL_SIM_INFO_INITIALIZER; NCCL checks the magic only,
// and a struct too small to hold estimatedTime cannot be written either.
ncclResult_t check_sim_info(const ncclSimInfo_t* info) {
  if (info == nullptr) return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is null");
  if (info->size < sizeof(ncclSimInfo_t)) {
    return fail(ncclInvalidArgument,
                "ncclGroupSimulateEnd: simInfo->size is %zu, less than sizeof(ncclSimInfo_t) = "
                "%zu (initialise it with NCCL_SIM_INFO_INITIALIZER)",
                info->size, sizeof(ncclSimInfo_t));
  }
  if (info->magic != kSimInfoMagic) {
    return fail(ncclInvalidArgument,
                "ncclGroupSimulateEnd: simInfo->magic is 0x%x, not NCCL_SIM_INFO_INITIALIZER's "
                "0x%x (initialise it with NCCL_SIM_INFO_INITIALIZER)",
                info->magic, kSimInfoMagic);
  }
  return ncclSuccess;
}

// Runs what an outermost group end carries out besides its calls: first the inits queued in it,
// then `calls` (the group's calls, run or simulated), then the finalizes. Returns the first
// failure in that order.
template <class Calls>
ncclResult_t end_outermost_group(Calls calls) {
  ncclResult_t init_result = ncclSuccess;
  if (!pending_inits().empty()) {
    std::vector<PendingInit> inits;
    inits.swap(pending_inits());
    init_result = run_pending_inits(std::move(inits));
  }
  const ncclResult_t group_result = calls();
  ncclResult_t finalize_result = ncclSuccess;
  if (!pending_finalizes().empty()) {
    std::vector<ncclComm*> comms;
    comms.swap(pending_finalizes());
    finalize_result = run_pending_finalizes(std::move(comms));
  }
  if (init_result != ncclSuccess) return init_result;
  if (group_result != ncclSuccess) return group_result;
  return finalize_result;
}

}  // namespace

void defer_init(const PendingInit& init) {
  pending_inits().push_back(init);
}

ncclResult_t defer_finalize(ncclComm* comm) {
  TERSE_CHECK(acquire_comm(comm, "ncclCommFinalize"));
  try {
    pending_finalizes().push_back(comm);
  } catch (...) {
    release_comm(comm);
    throw;
  }
  return ncclSuccess;
}

}  // namespace terse

using terse::fail;

TERSE_API ncclResult_t ncclGroupStart() try {
  TERSE_FORWARD_NESTED(ncclGroupStart);
  if (terse::wrap_mode()) {
    TERSE_CHECK(
        terse::forwarded(terse::call_real(terse::real_nccl()->ncclGroupStart, "ncclGroupStart"),
                         "ncclGroupStart", nullptr));
  }
  terse::begin_api_group();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclGroupStart");
}
TERSE_PROFILER_ALIAS(ncclGroupStart)

TERSE_API ncclResult_t ncclGroupEnd() try {
  TERSE_FORWARD_NESTED(ncclGroupEnd);
  const bool outermost = terse::api_group_depth() == 1;
  ncclResult_t real_result = ncclSuccess;
  if (terse::wrap_mode() && terse::api_group_depth() > 0) {
    real_result =
        terse::forwarded(terse::call_real(terse::real_nccl()->ncclGroupEnd, "ncclGroupEnd"),
                         "ncclGroupEnd", nullptr);
  }
  // A real group that failed ran none of the calls handed to it.
  const bool real_ran = real_result == ncclSuccess || real_result == ncclInProgress;
  const ncclResult_t terse_result =
      outermost ? terse::end_outermost_group([&] { return terse::end_api_group(real_ran); })
                : terse::end_api_group(real_ran);
  if (!real_ran) return real_result;
  if (terse_result != ncclSuccess) return terse_result;
  // ncclInProgress (a nonblocking real communicator) when terse's part succeeded.
  return real_result;
} catch (...) {
  return terse::result_of_current_exception("ncclGroupEnd");
}
TERSE_PROFILER_ALIAS(ncclGroupEnd)

TERSE_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) try {
  TERSE_FORWARD_NESTED(ncclGroupSimulateEnd, simInfo);
  const int depth = terse::api_group_depth();
  if (depth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart");
  }
  // Refused before anything ends: the group stays open (ncclGroupEnd may still end it). NCCL
  // closes it and discards it instead; either way nothing of it runs.
  TERSE_CHECK(terse::check_sim_info(simInfo));
  const bool wrap = terse::wrap_mode();
  if (wrap && terse::real_nccl()->ncclGroupSimulateEnd == nullptr) {
    return fail(ncclInvalidUsage,
                "ncclGroupSimulateEnd: the real NCCL (%s) has no ncclGroupSimulateEnd (NCCL "
                "before 2.22), so its part of the group cannot be simulated; the group stays "
                "open for ncclGroupEnd",
                terse::real_nccl()->path.c_str());
  }
  // The real library writes its estimate here, never into the caller's struct directly.
  ncclSimInfo_t real_info = NCCL_SIM_INFO_INITIALIZER;
  ncclResult_t real_result = ncclSuccess;
  if (wrap) {
    real_result = terse::forwarded(terse::call_real(terse::real_nccl()->ncclGroupSimulateEnd,
                                                    "ncclGroupSimulateEnd", &real_info),
                                   "ncclGroupSimulateEnd", nullptr);
  }
  double seconds = 0;
  size_t simulated = 0;
  // As in NCCL, an inner level only closes itself; the outermost end decides what the group
  // does, and only it fills simInfo.
  if (depth > 1) return terse::simulate_api_group(&seconds, &simulated);
  const ncclResult_t terse_result =
      terse::end_outermost_group([&] { return terse::simulate_api_group(&seconds, &simulated); });
  if (real_result != ncclSuccess && real_result != ncclInProgress) return real_result;
  if (terse_result != ncclSuccess) return terse_result;
  // NCCL leaves estimatedTime as the caller set it (NCCL_UNDEF_FLOAT) for a group without
  // collectives: so does each part here, and an empty part adds nothing.
  bool estimated = false;
  float estimate = 0;
  if (wrap && real_info.estimatedTime >= 0) {
    estimate += real_info.estimatedTime;
    estimated = true;
  }
  if (simulated > 0) {
    estimate += static_cast<float>(seconds * 1e6);
    estimated = true;
  }
  if (estimated) simInfo->estimatedTime = estimate;
  return real_result;
} catch (...) {
  return terse::result_of_current_exception("ncclGroupSimulateEnd");
}
TERSE_PROFILER_ALIAS(ncclGroupSimulateEnd)
