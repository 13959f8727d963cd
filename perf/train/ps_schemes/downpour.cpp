#include "perf/train/ps_schemes/downpour.h"

#include <algorithm>

namespace terse {
namespace ps {

Downpour::Downpour(const std::vector<SchemeTensor>& tensors, const DownpourSettings& settings)
    : settings_(settings) {
  settings_.send_every = std::max(settings_.send_every, 1);
  settings_.fetch_every = std::max(settings_.fetch_every, 1);
  for (const SchemeTensor& tensor : tensors) {
    Tensor t;
    t.tensor = tensor;
    t.previous.assign(tensor.values, tensor.values + tensor.count);
    t.unpushed.assign(tensor.count, 0.0f);
    t.unseen.assign(tensor.count, 0.0f);
    t.outgoing.assign(tensor.count, 0.0f);
    t.received.assign(tensor.count, 0.0f);
    tensors_.push_back(std::move(t));
  }
}

Downpour::~Downpour() {
  // A receive still writes into `received`: wait for it before the buffer goes.
  for (Tensor& tensor : tensors_) {
    if (tensor.receive != nullptr) tersePsSync(tensor.receive);
  }
}

ncclResult_t Downpour::start() {
  ncclResult_t result = ncclSuccess;
  if (settings_.fetch_every != 1) return result;
  for (Tensor& tensor : tensors_) result = first_failure(result, issue_receive(&tensor));
  return result;
}

ncclResult_t Downpour::step() {
  const uint64_t t = steps_;
  // What the optimizer did since the last step() returned is this step's update.
  for (Tensor& tensor : tensors_) {
    const float* values = tensor.tensor.values;
    for (size_t i = 0; i < tensor.tensor.count; ++i) {
      const float update = values[i] - tensor.previous[i];
      tensor.unpushed[i] += update;
      tensor.unseen[i] += update;
    }
  }
  steps_unpushed_ = true;
  ncclResult_t result = ncclSuccess;
  if ((t + 1) % static_cast<uint64_t>(settings_.send_every) == 0) result = push();
  const bool fetch_step = (t + 1) % static_cast<uint64_t>(settings_.fetch_every) == 0;
  const bool issue_step = (t + 2) % static_cast<uint64_t>(settings_.fetch_every) == 0;
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    if (fetch_step || tensor.overdue) result = fetch(&tensor);
    const bool outstanding = tensor.receive != nullptr || tensor.arrived;
    if (result == ncclSuccess && issue_step && !outstanding) result = issue_receive(&tensor);
  }
  for (Tensor& tensor : tensors_) {
    std::copy_n(tensor.tensor.values, tensor.tensor.count, tensor.previous.begin());
  }
  ++steps_;
  return result;
}

ncclResult_t Downpour::flush() {
  ncclResult_t result = steps_unpushed_ ? push() : ncclSuccess;
  result = first_failure(result, pushes_.wait_all());
  // The receive's data stays in `received` until its fetch step applies it.
  for (Tensor& tensor : tensors_) {
    if (tensor.receive == nullptr) continue;
    result = first_failure(result, tersePsSync(tensor.receive));
    tensor.receive = nullptr;
    tensor.arrived = true;
  }
  return result;
}

ncclResult_t Downpour::push() {
  // Released as they finish; a push waits only for those beyond the bound.
  ncclResult_t result = pushes_.release_finished((kPushesInFlight - 1) * tensors_.size());
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    for (size_t i = 0; i < tensor.tensor.count; ++i) {
      tensor.outgoing[i] = settings_.push_scale * tensor.unpushed[i];
    }
    tersePsRequest_t sync = nullptr;
    // tersePsSend reads `outgoing` before it returns, so it may be refilled at the next push.
    result = tersePsSend(tensor.tensor.handle, tensor.outgoing.data(), tersePsAdd, &sync);
    if (result != ncclSuccess) break;
    pushes_.add(sync);
    std::fill(tensor.unpushed.begin(), tensor.unpushed.end(), 0.0f);
  }
  if (result == ncclSuccess) steps_unpushed_ = false;
  return result;
}

ncclResult_t Downpour::issue_receive(Tensor* tensor) {
  // Issued after this worker's pushes, which its owners apply first: the receive contains them,
  // and of this worker's updates misses only those not pushed yet.
  const ncclResult_t result =
      tersePsReceive(tensor->tensor.handle, tensor->received.data(), &tensor->receive);
  if (result != ncclSuccess) {
    tensor->receive = nullptr;
    return result;
  }
  tensor->unseen = tensor->unpushed;
  return ncclSuccess;
}

ncclResult_t Downpour::fetch(Tensor* tensor) {
  if (tensor->receive != nullptr) {
    int done = 0;
    const ncclResult_t result = tersePsTest(tensor->receive, &done);
    if (result != ncclSuccess) {
      tensor->receive = nullptr;
      return result;
    }
    if (!done) {
      tensor->overdue = true;
      return ncclSuccess;
    }
    tensor->receive = nullptr;
    tensor->arrived = true;
  }
  if (!tensor->arrived) return ncclSuccess;
  for (size_t i = 0; i < tensor->tensor.count; ++i) {
    tensor->tensor.values[i] = tensor->received[i] + tensor->unseen[i];
  }
  std::fill(tensor->unseen.begin(), tensor->unseen.end(), 0.0f);
  tensor->arrived = false;
  tensor->overdue = false;
  return ncclSuccess;
}

}  // namespace ps
}  // namespace terse
