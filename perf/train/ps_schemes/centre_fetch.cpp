#include "perf/train/ps_schemes/centre_fetch.h"

#include "perf/train/ps_schemes/pending_requests.h"

namespace terse {
namespace ps {

ncclResult_t fetch_centre(const std::vector<SchemeTensor>& tensors,
                          const std::vector<float*>& centre) {
  if (centre.size() != tensors.size()) return ncclInvalidArgument;
  PendingRequests receives;
  ncclResult_t result = ncclSuccess;
  for (size_t i = 0; i < tensors.size() && result == ncclSuccess; ++i) {
    tersePsRequest_t sync = nullptr;
    result = tersePsReceive(tensors[i].handle, centre[i], &sync);
    if (result == ncclSuccess) receives.add(sync);
  }
  return first_failure(result, receives.wait_all());
}

}  // namespace ps
}  // namespace terse
