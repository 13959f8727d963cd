#include "terse_work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

namespace torch_terse {

TerseWork::TerseWork(int rank, c10d::OpType type, const char* profiling_title,
                     std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, profiling_title),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool TerseWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool TerseWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !error_;
}

std::exception_ptr TerseWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool TerseWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    done_.wait(lock, [this] { return completed_; });
  } else if (!done_.wait_for(lock, timeout, [this] { return completed_; })) {
    TORCH_CHECK(false, "terse: ", opTypeToString(retrieveOpType()), " did not complete within ",
                timeout.count(), " ms");
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void TerseWork::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    error_ = error;
  }
  done_.notify_all();
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace torch_terse
