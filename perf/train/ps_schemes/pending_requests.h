// The tersePs requests a scheme has in flight, so that each is synced exactly once (a sync
// releases it) and a failure is reported rather than lost.
#pragma once

#include <terse/terse.h>

#include <vector>

namespace terse {
namespace ps {

class PendingRequests {
 public:
  PendingRequests() = default;
  PendingRequests(const PendingRequests&) = delete;
  PendingRequests& operator=(const PendingRequests&) = delete;
  // Syncs whatever is left, ignoring the results: a scheme destroyed without flush() must still
  // release its requests (and wait for receives that write into buffers about to be freed).
  ~PendingRequests();

  void add(tersePsRequest_t sync) { syncs_.push_back(sync); }
  bool empty() const { return syncs_.empty(); }
  size_t size() const { return syncs_.size(); }
  // Releases the requests that have finished (tersePsTest), never waiting, then waits for the
  // oldest until at most `most` remain: a bound on what is in flight without a wait per request
  // (a slow owner, e.g. a straggler's server thread, then delays a worker only when it falls
  // `most` requests behind). The first failure's result.
  ncclResult_t release_finished(size_t most);
  // Syncs every request (all of them, even after a failure, so none stays unreleased); the first
  // failure's result.
  ncclResult_t wait_all();

 private:
  std::vector<tersePsRequest_t> syncs_;
};

// The first of two results that is not ncclSuccess.
inline ncclResult_t first_failure(ncclResult_t so_far, ncclResult_t next) {
  return so_far != ncclSuccess ? so_far : next;
}

}  // namespace ps
}  // namespace terse
