#include "perf/train/ps_schemes/easgd.h"

#include <algorithm>

namespace terse {
namespace ps {

Easgd::Easgd(const std::vector<SchemeTensor>& tensors, const EasgdSettings& settings)
    : settings_(settings) {
  settings_.tau = std::max(settings_.tau, 1);
  for (const SchemeTensor& tensor : tensors) {
    tensors_.push_back(Tensor{tensor, std::vector<float>(tensor.count, 0.0f),
                              std::vector<float>(tensor.count, 0.0f)});
  }
}

ncclResult_t Easgd::step() {
  const uint64_t t = steps_++;
  if ((t + 1) % static_cast<uint64_t>(settings_.tau) != 0) return ncclSuccess;
  return exchange();
}

ncclResult_t Easgd::exchange() {
  // The last exchanges' pushes are released as they finish, never waited for below the bound:
  // this worker's receive sees its own last pull anyway (an owner applies a client's requests in
  // order).
  ncclResult_t result = pushes_.release_finished((kPushesInFlight - 1) * tensors_.size());
  PendingRequests receives;
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    tersePsRequest_t sync = nullptr;
    result = tersePsReceive(tensor.tensor.handle, tensor.centre.data(), &sync);
    if (result == ncclSuccess) receives.add(sync);
  }
  result = first_failure(result, receives.wait_all());
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    float* x = tensor.tensor.values;
    for (size_t i = 0; i < tensor.tensor.count; ++i) {
      const float d = settings_.alpha * (x[i] - tensor.centre[i]);
      tensor.difference[i] = d;
      x[i] -= d;
    }
    tersePsRequest_t sync = nullptr;
    result = tersePsSend(tensor.tensor.handle, tensor.difference.data(), tersePsAdd, &sync);
    if (result == ncclSuccess) pushes_.add(sync);
  }
  return result;
}

}  // namespace ps
}  // namespace terse
