// A Work as torch.distributed hands it back: done when terse's worker thread finished the
// collective, with the tensors it produced or the exception naming the call that failed.
// wait() blocks (bounded by its timeout), getFuture() completes with the same outcome, which is
// how DDP's reducer and comm hooks consume it.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>

namespace torch_terse {

class TerseWork : public c10d::Work {
 public:
  TerseWork(int rank, c10d::OpType type, const char* profiling_title,
            std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The worker thread's end of it: the collective finished (error null) or failed.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
};

}  // namespace torch_terse
