// The compression engine's tensor clock (compression_engine.h, the file comment's 1. and 4.): each
// tensor's step, the communicator's step that residual memory keeps time by, and the forgetting
// of tensors gone idle.
#include <algorithm>
#include <iterator>

#include "collectives/compressed/compression_engine.h"
#include "collectives/compressed/compression_engine_internal.h"

namespace terse {
namespace {

// How often (in communicator steps) the tensors gone idle are looked for.
constexpr uint64_t kForgetSweepSteps = 64;

}  // namespace

void CompressionEngine::advance_clock(const Plan& plan) {
  comm_step_ = std::max(comm_step_, step_base_ + plan.step);
  if (steps_.size() >= kMaxTrackedTensors) {
    steps_.clear();
    step_base_ = comm_step_ + 1;  // steps restart at 0; the clock goes on from here
  }
  TensorRecord& record = steps_[plan.key];
  ++record.calls;
  record.last_used = comm_step_;
  residuals_->set_step(comm_step_);
  if (comm_step_ >= next_forget_) forget_idle_tensors();
}

void CompressionEngine::forget_idle_tensors() {
  next_forget_ = comm_step_ + kForgetSweepSteps;
  const uint64_t horizon = std::max(kForgetIdleSteps, residuals_->idle_steps());
  if (comm_step_ <= horizon) return;
  const uint64_t oldest_kept = comm_step_ - horizon;
  for (auto it = steps_.begin(); it != steps_.end();) {
    it = it->second.last_used < oldest_kept ? steps_.erase(it) : std::next(it);
  }
  const auto forgotten = [&](const TensorKey& key) { return steps_.count(key) == 0; };
  for (auto it = logged_.begin(); it != logged_.end();) {
    it = forgotten(it->key) ? logged_.erase(it) : std::next(it);
  }
  for (auto it = refused_.begin(); it != refused_.end();) {
    it = forgotten(it->first) ? refused_.erase(it) : std::next(it);
  }
}

size_t CompressionEngine::tracked_tensors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_.size();
}

}  // namespace terse
