#include "ps/schemes/downpour.h"

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

ncclResult_t Downpour::start() {
  return settings_.fetch_every == 1 ? issue_receive() : ncclSuccess;
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
  if (result == ncclSuccess && receiving_ &&
      (t + 1) % static_cast<uint64_t>(settings_.fetch_every) == 0) {
    result = apply_receive();
  }
  if (result == ncclSuccess && !receiving_ &&
      (t + 2) % static_cast<uint64_t>(settings_.fetch_every) == 0) {
    result = issue_receive();
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
  return first_failure(result, receives_.wait_all());
}

ncclResult_t Downpour::push() {
  // One push per tensor in flight: the last one must be applied before this one is made.
  ncclResult_t result = pushes_.wait_all();
  for (Tensor& tensor : tensors_) {
    if (result != ncclSuccess) break;
    for (size_t i = 0; i < tensor.tensor.count; ++i) {
      tensor.outgoing[i] = settings_.push_scale * tensor.unpushed[i];
    }
    tersePsSync_t sync = nullptr;
    // tersePsSend reads `outgoing` before it returns, so it may be refilled at the next push.
    result = tersePsSend(tensor.tensor.handle, tensor.outgoing.data(), tersePsAdd, &sync);
    if (result != ncclSuccess) break;
    pushes_.add(sync);
    std::fill(tensor.unpushed.begin(), tensor.unpushed.end(), 0.0f);
  }
  if (result == ncclSuccess) steps_unpushed_ = false;
  return result;
}

ncclResult_t Downpour::issue_receive() {
  ncclResult_t result = ncclSuccess;
  for (Tensor& tensor : tensors_) {
    tersePsSync_t sync = nullptr;
    // Issued after this worker's pushes, which its owners apply first: the receive contains them,
    // and of this worker's updates misses only those not pushed yet.
    result = tersePsReceive(tensor.tensor.handle, tensor.received.data(), &sync);
    if (result != ncclSuccess) break;
    receives_.add(sync);
    tensor.unseen = tensor.unpushed;
  }
  receiving_ = true;
  return result;
}

ncclResult_t Downpour::apply_receive() {
  const ncclResult_t result = receives_.wait_all();
  receiving_ = false;
  if (result != ncclSuccess) return result;
  for (Tensor& tensor : tensors_) {
    for (size_t i = 0; i < tensor.tensor.count; ++i) {
      tensor.tensor.values[i] = tensor.received[i] + tensor.unseen[i];
    }
    std::fill(tensor.unseen.begin(), tensor.unseen.end(), 0.0f);
  }
  return ncclSuccess;
}

}  // namespace ps
}  // namespace terse
