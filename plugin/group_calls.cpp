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
// part's prediction to the estimate it gave; a nonblocking real communicator, whose group NCCL
// launches instead, has terse's part run too. What it refuses, and in which order, is NCCL's
// (ncclGroupSimulateEnd below).
#include <algorithm>
#include <cstddef>
#include <cstring>
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

// The magic NCCL_SIM_INFO_INITIALIZER writes, taken from nccl.h's own initializer.
constexpr ncclSimInfo_t kInitialSimInfo = NCCL_SIM_INFO_INITIALIZER;
constexpr unsigned int kSimInfoMagic = kInitialSimInfo.magic;

// A simInfo as NCCL reads it (src/group.cc, ncclGroupEndInternal): the caller's first `size`
// bytes, at most the whole struct, over one without the magic, so that a struct too small to
// hold the magic has none. NCCL writes back the same bytes only, so a struct too small to hold
// estimatedTime never gets an estimate.
struct GivenSimInfo {
  ncclSimInfo_t info;
  size_t bytes = 0;
};

GivenSimInfo read_sim_info(const ncclSimInfo_t* given) {
  GivenSimInfo read{NCCL_SIM_INFO_INITIALIZER};
  read.info.magic = 0;
  size_t size = 0;
  std::memcpy(&size, &given->size, sizeof(size));
  read.bytes = std::min(size, sizeof(ncclSimInfo_t));
  std::memcpy(&read.info, given, read.bytes);
  return read;
}

bool holds_estimate(const GivenSimInfo& given) {
  return given.bytes >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float);
}

// Runs what an outermost group end carries out besides its calls: first the inits queued in it,
// then `calls` (the group's calls, run, simulated or discarded), then the finalizes. Returns the
// first failure in that order. Without `run_jobs` (a group NCCL closes without running anything
// of it) the inits and finalizes are dropped as NCCL drops them: the communicators of those
// inits stay uncreated (only ncclCommDestroy or ncclCommAbort works on them), and those of the
// finalizes are not finalized.
template <class Calls>
ncclResult_t end_outermost_group(Calls calls, bool run_jobs = true) {
  std::vector<PendingInit> inits;
  inits.swap(pending_inits());
  std::vector<ncclComm*> finalizes;
  finalizes.swap(pending_finalizes());
  if (!run_jobs) {
    // Each pending finalize holds a use of its communicator (defer_finalize).
    for (ncclComm* comm : finalizes) release_comm(comm);
    return calls();
  }
  const ncclResult_t init_result =
      inits.empty() ? ncclSuccess : run_pending_inits(std::move(inits));
  const ncclResult_t group_result = calls();
  const ncclResult_t finalize_result =
      finalizes.empty() ? ncclSuccess : run_pending_finalizes(std::move(finalizes));
  if (init_result != ncclSuccess) return init_result;
  if (group_result != ncclSuccess) return group_result;
  return finalize_result;
}

// ncclGroupEnd; also ncclGroupSimulateEnd without simInfo, which NCCL ends as ncclGroupEnd.
ncclResult_t end_group() {
  const bool outermost = api_group_depth() == 1;
  ncclResult_t real_result = ncclSuccess;
  if (wrap_mode() && api_group_depth() > 0) {
    real_result =
        forwarded(call_real(real_nccl()->ncclGroupEnd, "ncclGroupEnd"), "ncclGroupEnd", nullptr);
  }
  // A real group that failed ran none of the calls handed to it.
  const bool real_ran = real_result == ncclSuccess || real_result == ncclInProgress;
  const ncclResult_t terse_result =
      outermost ? end_outermost_group([&] { return end_api_group(real_ran); })
                : end_api_group(real_ran);
  if (!real_ran) return real_result;
  if (terse_result != ncclSuccess) return terse_result;
  // ncclInProgress (a nonblocking real communicator) when terse's part succeeded.
  return real_result;
}

// ncclGroupSimulateEnd at the outermost level, simInfo given.
ncclResult_t simulate_outermost(ncclSimInfo_t* simInfo) {
  const GivenSimInfo given = read_sim_info(simInfo);
  const bool wrap = wrap_mode();
  if (wrap && real_nccl()->ncclGroupSimulateEnd == nullptr) {
    return fail(ncclInvalidUsage,
                "ncclGroupSimulateEnd: the real NCCL (%s) has no ncclGroupSimulateEnd (NCCL "
                "before 2.22), so its part of the group cannot be simulated; the group stays "
                "open for ncclGroupEnd",
                real_nccl()->path.c_str());
  }
  // The real NCCL judges the caller's magic as its own ncclGroupSimulateEnd would (closing and
  // discarding its part of the group on a bad one) and writes its estimate here, a struct of
  // its full size, never into the caller's.
  ncclSimInfo_t real_info = NCCL_SIM_INFO_INITIALIZER;
  real_info.magic = given.info.magic;
  ncclResult_t real_result = ncclSuccess;
  if (wrap) {
    real_result =
        forwarded(call_real(real_nccl()->ncclGroupSimulateEnd, "ncclGroupSimulateEnd", &real_info),
                  "ncclGroupSimulateEnd", nullptr);
  }
  if (real_result == ncclInProgress) {
    // A nonblocking real communicator: NCCL ignores simInfo for a nonblocking group and
    // launches it. Its calls run, so terse's part runs as well, as ncclGroupEnd would run it,
    // and the hand-offs count: every rank's group is nonblocking alike, so the ranks stay in
    // step, and the application sees what NCCL alone gives it (ncclInProgress, simInfo as it
    // was). Simulating terse's part instead would leave the tensors' steps behind the calls
    // that really ran.
    const ncclResult_t terse_result =
        end_outermost_group([] { return end_api_group(/*hand_offs_ran=*/true); });
    return terse_result != ncclSuccess ? terse_result : ncclInProgress;
  }
  if (given.info.magic != kSimInfoMagic) {
    // As NCCL: the group is closed and nothing of it runs. A call the group refused is
    // reported first, as NCCL reports its group's error before it reads simInfo.
    const ncclResult_t refused =
        end_outermost_group([] { return discard_api_group(); }, /*run_jobs=*/false);
    if (refused != ncclSuccess) return refused;
    if (real_result != ncclSuccess && real_result != ncclInvalidArgument) return real_result;
    return fail(ncclInvalidArgument,
                "ncclGroupSimulateEnd: simInfo->magic is 0x%x, not NCCL_SIM_INFO_INITIALIZER's "
                "0x%x (initialise it with NCCL_SIM_INFO_INITIALIZER); the group was closed and "
                "nothing of it ran",
                given.info.magic, kSimInfoMagic);
  }
  double seconds = 0;
  size_t simulated = 0;
  const ncclResult_t terse_result =
      end_outermost_group([&] { return simulate_api_group(&seconds, &simulated); });
  if (real_result != ncclSuccess) return real_result;
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
  if (estimated && holds_estimate(given)) simInfo->estimatedTime = estimate;
  return ncclSuccess;
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
  return terse::end_group();
} catch (...) {
  return terse::result_of_current_exception("ncclGroupEnd");
}
TERSE_PROFILER_ALIAS(ncclGroupEnd)

// Checked in NCCL's order (src/group.cc, ncclGroupEndInternal): no open group; an inner level,
// which only closes itself whatever simInfo is; the group's refused call; a null simInfo, with
// which the group runs as at ncclGroupEnd; simInfo's magic, refused by closing and discarding
// the group.
TERSE_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) try {
  TERSE_FORWARD_NESTED(ncclGroupSimulateEnd, simInfo);
  const int depth = terse::api_group_depth();
  if (depth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart");
  }
  if (simInfo == nullptr) return terse::end_group();
  if (depth > 1) {
    // An inner level of the real NCCL's group ends alike through ncclGroupEnd, which every
    // real library has.
    ncclResult_t real_result = ncclSuccess;
    if (terse::wrap_mode()) {
      real_result =
          terse::forwarded(terse::call_real(terse::real_nccl()->ncclGroupEnd, "ncclGroupEnd"),
                           "ncclGroupSimulateEnd", nullptr);
    }
    const ncclResult_t terse_result = terse::end_api_group(/*hand_offs_ran=*/true);
    if (real_result != ncclSuccess) return real_result;
    return terse_result;
  }
  return terse::simulate_outermost(simInfo);
} catch (...) {
  return terse::result_of_current_exception("ncclGroupSimulateEnd");
}
TERSE_PROFILER_ALIAS(ncclGroupSimulateEnd)
