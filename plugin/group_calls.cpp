// ncclGroupStart / ncclGroupEnd: the group's calls are queued and run by call_routing.h (host
// buffers through the engine's groups, collectives/group.h; device buffers through staging);
// communicators initialised inside the group are created at the outermost ncclGroupEnd before
// the calls run, and communicators finalized inside it are finalized after. In wrap mode
// (comm_mode.h) every group is also a group of the real NCCL's, holding the calls forwarded to
// it; the real ncclGroupEnd runs first (creating the real communicators of the group's inits,
// whose terse sides are made from them next), then terse's part of the group.
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
  ncclResult_t init_result = ncclSuccess;
  if (outermost && !terse::pending_inits().empty()) {
    std::vector<terse::PendingInit> inits;
    inits.swap(terse::pending_inits());
    init_result = terse::run_pending_inits(std::move(inits));
  }
  const ncclResult_t group_result = terse::end_api_group();
  ncclResult_t finalize_result = ncclSuccess;
  if (outermost && !terse::pending_finalizes().empty()) {
    std::vector<ncclComm*> comms;
    comms.swap(terse::pending_finalizes());
    finalize_result = terse::run_pending_finalizes(std::move(comms));
  }
  if (real_result != ncclSuccess && real_result != ncclInProgress) return real_result;
  if (init_result != ncclSuccess) return init_result;
  if (group_result != ncclSuccess) return group_result;
  if (finalize_result != ncclSuccess) return finalize_result;
  // ncclInProgress (a nonblocking real communicator) when terse's part succeeded.
  return real_result;
} catch (...) {
  return terse::result_of_current_exception("ncclGroupEnd");
}
TERSE_PROFILER_ALIAS(ncclGroupEnd)
