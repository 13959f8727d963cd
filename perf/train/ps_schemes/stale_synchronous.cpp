#include "perf/train/ps_schemes/stale_synchronous.h"

#include <algorithm>

namespace terse {
namespace ps {

StaleSynchronous::StaleSynchronous(const std::vector<SchemeTensor>& tensors,
                                   const StaleSynchronousSettings& settings)
    : settings_(settings) {
  for (const SchemeTensor& tensor : tensors) {
    tensors_.push_back(Tensor{tensor,
                              std::vector<float>(tensor.values, tensor.values + tensor.count),
                              std::vector<float>(tensor.count, 0.0f)});
  }
}

ncclResult_t StaleSynchronous::step() {
  const uint64_t completed = ++steps_;
  ncclResult_t result = ncclSuccess;
  for (Tensor& tensor : tensors_) {
    const float* values = tensor.tensor.values;
    for (size_t i = 0; i < tensor.tensor.count; ++i) {
      tensor.outgoing[i] = settings_.push_scale * (values[i] - tensor.previous[i]);
    }
    tersePsRequest_t sync = nullptr;
    result = tersePsSend(tensor.tensor.handle, tensor.outgoing.data(), tersePsAdd, &sync);
    if (result != ncclSuccess) break;
    pushes_.add(sync);
  }
  // The clocks need not wait for the pushes: each owner applies this worker's push before its
  // clock. The pushes are synced at the end of the step (or by flush) to release them.
  PendingRequests clocks;
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    tersePsRequest_t sync = nullptr;
    result = tersePsClock(tensor.tensor.handle, completed, settings_.staleness, &sync);
    if (result == ncclSuccess) clocks.add(sync);
  }
  result = first_failure(result, clocks.wait_all());
  PendingRequests receives;
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    tersePsRequest_t sync = nullptr;
    result = tersePsReceive(tensor.tensor.handle, tensor.tensor.values, &sync);
    if (result == ncclSuccess) receives.add(sync);
  }
  result = first_failure(result, receives.wait_all());
  result = first_failure(result, pushes_.wait_all());
  for (Tensor& tensor : tensors_) {
    std::copy_n(tensor.tensor.values, tensor.tensor.count, tensor.previous.begin());
  }
  return result;
}

}  // namespace ps
}  // namespace terse
