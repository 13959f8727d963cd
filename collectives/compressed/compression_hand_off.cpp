// The compression engine's hand-offs (compression_engine.h): calls the policy leaves uncompressed
// that wrap mode runs on a real NCCL, counted once their runner took them, at once or when their
// group has run (PendingSteps).
#include <algorithm>
#include <vector>

#include "collectives/compressed/compression_engine.h"
#include "common/result.h"

namespace terse {

ncclResult_t CompressionEngine::hand_off_uncompressed(const CollectiveArgs& args,
                                                      const PendingSteps* pending, bool* elsewhere,
                                                      HandOff* hand_off) {
  *elsewhere = false;
  *hand_off = HandOff{};
  std::lock_guard<std::mutex> lock(mutex_);
  if (!policy_.rules().empty() || args.tensor != nullptr) {
    TERSE_CHECK(this->plan(args, /*may_agree=*/false, pending, &hand_off->plan));
    const Plan& plan = hand_off->plan;
    if (plan.compressed || (plan.automatic && !plan.call.agreed)) return ncclSuccess;
    hand_off->planned = true;
  }
  hand_off->args = args;
  *elsewhere = true;
  return ncclSuccess;
}

void CompressionEngine::count_hand_off(HandOff hand_off, const char* runner,
                                       PendingSteps* pending) {
  hand_off.runner = runner;
  if (pending != nullptr) {
    if (hand_off.planned) ++pending->steps_[hand_off.plan.key];
    pending->hand_offs_.push_back(std::move(hand_off));
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  count_hand_off_locked(hand_off);
}

void CompressionEngine::count_hand_off_locked(const HandOff& hand_off) {
  // At the step it was planned at: a group's hand-offs are counted in issue order, each planned
  // after the steps of those before it.
  if (hand_off.planned) {
    advance_clock(hand_off.plan);
    log_first_decision(hand_off.plan, hand_off.args);
  }
  record("none", hand_off.runner, hand_off.args.count * nccl_type_size(hand_off.args.type), 0,
         CompressionCounters{}, 0, false);
}

void CompressionEngine::commit(PendingSteps* pending) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const HandOff& hand_off : pending->hand_offs_) count_hand_off_locked(hand_off);
  pending->hand_offs_.clear();
  pending->steps_.clear();
}

ncclResult_t CompressionEngine::prepare_hand_off() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Hand-offs are decided outside the calls whose agreements move the figures (the stream proxy
  // may run an allreduce at any moment), so the figures must stay as agreed now.
  planner_->stop_learning();
  const std::vector<PolicyRule>& rules = policy_.rules();
  const bool automatic = std::any_of(rules.begin(), rules.end(), [](const PolicyRule& rule) {
    return rule.codec.name == kAutoCodec;
  });
  return automatic ? planner_->agree_auto_speeds() : ncclSuccess;
}

}  // namespace terse
