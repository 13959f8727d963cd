#include "perf/train/job_progress.h"

namespace terse {
namespace train {

JobProgress::JobProgress(ncclComm_t comm, int rank, int nranks)
    : comm_(comm),
      rank_(rank),
      nranks_(nranks),
      one_step_(static_cast<size_t>(nranks), 0.0f),
      received_(static_cast<size_t>(nranks), 0.0f) {
  one_step_[static_cast<size_t>(rank)] = 1.0f;
}

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

ncclResult_t JobProgress::count_step() {
  if (push_ != nullptr) {
    const ncclResult_t result = tersePsSync(push_);
    push_ = nullptr;
    if (result != ncclSuccess) return result;
  }
  ncclResult_t result = tersePsSend(handle_, one_step_.data(), tersePsAdd, &push_);
  if (result != ncclSuccess) return result;
  if (receive_ != nullptr) {
    int done = 0;
    result = tersePsTest(receive_, &done);
    if (result != ncclSuccess || !done) {
      if (result != ncclSuccess) receive_ = nullptr;
      return result;
    }
    receive_ = nullptr;
    take_received();
  }
  return tersePsReceive(handle_, received_.data(), &receive_);
}

ncclResult_t JobProgress::flush() {
  ncclResult_t result = ncclSuccess;
  if (push_ != nullptr) result = tersePsSync(push_);
  push_ = nullptr;
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
