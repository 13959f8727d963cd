#include "perf/train/job_progress.h"

namespace terse {
namespace train {

JobProgress::JobProgress(ncclComm_t comm, int rank, int nranks)
    : comm_(comm),
      rank_(rank),
      nranks_(nranks),
      outgoing_(static_cast<size_t>(nranks), 0.0f),
      received_(static_cast<size_t>(nranks), 0.0f) {}

JobProgress::~JobProgress() {
  if (handle_ != nullptr) free();
}

ncclResult_t JobProgress::init() {
  const std::vector<float> zeros(static_cast<size_t>(nranks_), 0.0f);
  tersePsTensorDesc description{};
  description.name = "train.progress";
  description.data = zeros.data();
  description.count = zeros.size();
  description.datatype = ncclFloat32;
  description.push_codec = "none";
  description.receive_codec = "none";
  return tersePsInitList(comm_, &description, 1, &handle_);
}

void JobProgress::take_received() {
  double total = 0.0;
  for (float steps : received_) total += steps;
  total_seen_ = static_cast<uint64_t>(total);
}

ncclResult_t JobProgress::poll(tersePsRequest_t* request, bool* done) {
  int finished = 1;
  const ncclResult_t result = *request != nullptr ? tersePsTest(*request, &finished) : ncclSuccess;
  // A failed test has released the request, as a finished one is.
  if (result != ncclSuccess || finished) *request = nullptr;
  *done = finished != 0;
  return result;
}

ncclResult_t JobProgress::push_uncounted() {
  outgoing_[static_cast<size_t>(rank_)] = static_cast<float>(uncounted_);
  uncounted_ = 0;
  return tersePsSend(handle_, outgoing_.data(), tersePsAdd, &push_);
}

ncclResult_t JobProgress::count_step() {
  ++uncounted_;
  // Nothing here waits: a push still on its way (its owner may be a straggler) leaves this step
  // to the next push, and a receive still on its way leaves the total as last seen.
  bool pushed = false;
  ncclResult_t result = poll(&push_, &pushed);
  if (result == ncclSuccess && pushed) result = push_uncounted();
  bool received = false;
  if (result == ncclSuccess) result = poll(&receive_, &received);
  if (result != ncclSuccess || !received) return result;
  // received_ holds the last receive that completed (or refresh()'s, or zeros at first).
  take_received();
  return tersePsReceive(handle_, received_.data(), &receive_);
}

ncclResult_t JobProgress::flush() {
  ncclResult_t result = ncclSuccess;
  if (push_ != nullptr) result = tersePsSync(push_);
  push_ = nullptr;
  if (result == ncclSuccess && uncounted_ > 0) {
    result = push_uncounted();
    if (result == ncclSuccess) result = tersePsSync(push_);
    push_ = nullptr;
  }
  if (receive_ != nullptr) {
    const ncclResult_t received = tersePsSync(receive_);
    if (result == ncclSuccess) result = received;
  }
  receive_ = nullptr;
  return result;
}

ncclResult_t JobProgress::refresh() {
  ncclResult_t result = flush();
  if (result != ncclSuccess) return result;
  result = tersePsReceive(handle_, received_.data(), &receive_);
  if (result != ncclSuccess) return result;
  result = tersePsSync(receive_);
  receive_ = nullptr;
  if (result == ncclSuccess) take_received();
  return result;
}

ncclResult_t JobProgress::free() {
  ncclResult_t result = flush();
  const ncclResult_t freed = tersePsFree(handle_);
  handle_ = nullptr;
  return result != ncclSuccess ? result : freed;
}

}  // namespace train
}  // namespace terse
