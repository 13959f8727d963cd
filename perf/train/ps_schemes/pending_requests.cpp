#include "perf/train/ps_schemes/pending_requests.h"

namespace terse {
namespace ps {

PendingRequests::~PendingRequests() {
  wait_all();
}

ncclResult_t PendingRequests::release_finished(size_t most) {
  ncclResult_t result = ncclSuccess;
  std::vector<tersePsRequest_t> running;
  for (tersePsRequest_t sync : syncs_) {
    int done = 0;
    const ncclResult_t tested = tersePsTest(sync, &done);
    // A failed test has released the request (tersePsTest returns what tersePsSync would).
    if (tested != ncclSuccess || done) {
      result = first_failure(result, tested);
      continue;
    }
    running.push_back(sync);
  }
  size_t oldest = 0;
  for (; running.size() - oldest > most; ++oldest) {
    result = first_failure(result, tersePsSync(running[oldest]));
  }
  syncs_.assign(running.begin() + static_cast<long>(oldest), running.end());
  return result;
}

ncclResult_t PendingRequests::wait_all() {
  ncclResult_t result = ncclSuccess;
  for (tersePsRequest_t sync : syncs_) result = first_failure(result, tersePsSync(sync));
  syncs_.clear();
  return result;
}

}  // namespace ps
}  // namespace terse
