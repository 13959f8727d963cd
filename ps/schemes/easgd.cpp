#include "ps/schemes/easgd.h"

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
  // The last exchange's pushes first: this worker's receive must see its own last pull.
  ncclResult_t result = pushes_.wait_all();
  PendingRequests receives;
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    tersePsSync_t sync = nullptr;
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
    tersePsSync_t sync = nullptr;
    result = tersePsSend(tensor.tensor.handle, tensor.difference.data(), tersePsAdd, &sync);
    if (result == ncclSuccess) pushes_.add(sync);
  }
  return result;
}

}  // namespace ps
}  // namespace terse
