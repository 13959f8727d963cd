// ncclGroupStart / ncclGroupEnd over the engine's groups (collectives/group.h), plus the one
// thing only the API layer queues: communicators initialised inside the group, created at the
// outermost ncclGroupEnd before the group's calls run.
#include <string>
#include <thread>
#include <vector>

#include "collectives/group.h"
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"

namespace terse {
namespace {

std::vector<PendingInit>& pending_inits() {
  thread_local std::vector<PendingInit> pending;
  return pending;
}

std::vector<Communicator*>& pending_finalizes() {
  thread_local std::vector<Communicator*> pending;
  return pending;
}

ncclResult_t run_pending_finalizes(std::vector<Communicator*> engines) {
  std::vector<ncclResult_t> results(engines.size(), ncclSuccess);
  std::vector<std::string> messages(engines.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < engines.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = engines[i]->finalize();
      if (results[i] != ncclSuccess) messages[i] = last_error();
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t i = 0; i < engines.size(); ++i) {
    if (results[i] != ncclSuccess) {
      return fail(results[i], "ncclGroupEnd: ncclCommFinalize of rank %d failed: %s",
                  engines[i]->rank(), messages[i].c_str());
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

void defer_finalize(Communicator* engine) {
  pending_finalizes().push_back(engine);
}

}  // namespace terse

TERSE_API ncclResult_t ncclGroupStart() {
  return terse::group_start();
}
TERSE_PROFILER_ALIAS(ncclGroupStart)

TERSE_API ncclResult_t ncclGroupEnd() {
  const bool outermost = terse::group_depth() == 1;
  ncclResult_t init_result = ncclSuccess;
  if (outermost && !terse::pending_inits().empty()) {
    std::vector<terse::PendingInit> inits;
    inits.swap(terse::pending_inits());
    init_result = terse::run_pending_inits(std::move(inits));
  }
  const ncclResult_t group_result = terse::group_end();
  ncclResult_t finalize_result = ncclSuccess;
  if (outermost && !terse::pending_finalizes().empty()) {
    std::vector<terse::Communicator*> engines;
    engines.swap(terse::pending_finalizes());
    finalize_result = terse::run_pending_finalizes(std::move(engines));
  }
  if (init_result != ncclSuccess) return init_result;
  return group_result != ncclSuccess ? group_result : finalize_result;
}
TERSE_PROFILER_ALIAS(ncclGroupEnd)
