// ncclGroupStart / ncclGroupEnd: the group's calls are queued and run by call_routing.h (host
// buffers through the engine's groups, collectives/group.h; device buffers through staging);
// communicators initialised inside the group are created at the outermost ncclGroupEnd before
// the calls run, and communicators finalized inside it are finalized after.
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "plugin/call_routing.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"

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

ncclResult_t run_pending_finalizes(std::vector<ncclComm*> comms) {
  std::vector<ncclResult_t> results(comms.size(), ncclSuccess);
  std::vector<std::string> messages(comms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = finalize_in_order(comms[i]);
      if (results[i] != ncclSuccess) messages[i] = last_error();
    });
  }
  for (auto& thread : threads) thread.join();
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
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i) {
    threads.emplace_back([&, i] {
      const PendingInit& init = inits[i];
      results[i] = Communicator::create(init.id, init.rank, init.nranks, init.cuda_device,
                                        &init.comm->engine);
      if (results[i] != ncclSuccess) messages[i] = last_error();
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t i = 0; i < inits.size(); ++i) {
    if (results[i] != ncclSuccess) {
      return fail(results[i], "ncclGroupEnd: ncclCommInitRank of rank %d of %d failed: %s",
                  inits[i].rank, inits[i].nranks, messages[i].c_str());
    }
  }
  return ncclSuccess;
}

}  // namespace

void defer_init(const PendingInit& init) {
  pending_inits().push_back(init);
}

void defer_finalize(ncclComm* comm) {
  pending_finalizes().push_back(comm);
}

}  // namespace terse

TERSE_API ncclResult_t ncclGroupStart() {
  terse::begin_api_group();
  return ncclSuccess;
}
TERSE_PROFILER_ALIAS(ncclGroupStart)

TERSE_API ncclResult_t ncclGroupEnd() {
  const bool outermost = terse::api_group_depth() == 1;
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
  if (init_result != ncclSuccess) return init_result;
  return group_result != ncclSuccess ? group_result : finalize_result;
}
TERSE_PROFILER_ALIAS(ncclGroupEnd)
