#include "ps/schemes/pending_requests.h"

namespace terse {
namespace ps {

PendingRequests::~PendingRequests() {
  wait_all();
}

ncclResult_t PendingRequests::wait_all() {
  ncclResult_t result = ncclSuccess;
  for (tersePsSync_t sync : syncs_) result = first_failure(result, tersePsSync(sync));
  syncs_.clear();
  return result;
}

}  // namespace ps
}  // namespace terse
