#include "collectives/compressed/planner.h"

#include <algorithm>
#include <cstdio>

#include "collectives/compressed/planner_internal.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  return text;
}

}  // namespace

ncclResult_t parse_hierarchy_mode(const std::string& text, HierarchyMode* mode) {
  if (text.empty() || text == "auto") {
    *mode = HierarchyMode::kAuto;
  } else if (text == "on" || text == "1") {
    *mode = HierarchyMode::kOn;
  } else if (text == "off" || text == "0") {
    *mode = HierarchyMode::kOff;
  } else {
    return fail(ncclInvalidArgument, "TERSE_HIERARCHICAL=%s: expected auto, on or off",
                text.c_str());
  }
  return ncclSuccess;
}

std::string CallPlan::describe() const {
  std::string text;
  if (chosen >= 0) {
    const PlanCandidate& best = candidates[static_cast<size_t>(chosen)];
    text = best.codec + " " + best.algorithm + " " + milliseconds(best.prediction.seconds);
  }
  if (candidates.size() > 1) {
    text += " (predicted:";
    for (size_t i = 0; i < candidates.size(); ++i) {
      const PlanCandidate& c = candidates[i];
      text += (i == 0 ? " " : ", ") + c.codec + " " + c.algorithm + " " +
              milliseconds(c.prediction.seconds);
    }
    text += ")";
  }
  return text;
}

std::string CallPlan::choice() const {
  if (chosen < 0) return "";
  const PlanCandidate& c = candidates[static_cast<size_t>(chosen)];
  return c.codec + " " + c.algorithm;
}

ncclResult_t Planner::plan(const PlanRequest& request, CallPlan* plan) {
  // A training step asks the same questions every time: a plan made on agreed figures holds for
  // every later call with the same request until the figures move (Learning).
  const PlanKey key = PlanKey::of(request);
  if (!request.may_agree) {
    const auto known = plans_.find(key);
    if (known != plans_.end() && known->second.generation == generation_) {
      *plan = known->second.plan;  // kept as made: its best chosen
      return ncclSuccess;
    }
    return make_plan(request, plan);
  }
  auto known = plans_.find(key);
  if (known == plans_.end()) {
    if (plans_.size() >= kMaxCachedPlans) plans_.clear();
    known = plans_.emplace(key, KeyState{}).first;
  }
  KeyState& state = known->second;
  if (state.plan.best < 0 || state.generation != generation_) {
    CallPlan fresh;
    TERSE_CHECK(make_plan(request, &fresh));
    if (state.plan.best >= 0) keep_unless_clearly_slower(request, state.plan.choice(), &fresh);
    if (state.plan.best >= 0 && fresh.choice() != state.plan.choice()) {
      ++plan_changes_;
      if (rank_ == 0) {
        TERSE_INFO(
            "planner: %zu x %s (%s): plan changed from %s to %s; its last call ran %s in %s; "
            "predicted now: %s; figures: %s",
            request.count, dtype_name(request.dtype),
            request.codec != nullptr ? request.codec->spec().c_str() : "auto",
            state.plan.choice().c_str(), fresh.choice().c_str(), state.last_choice.c_str(),
            milliseconds(state.last_measured).c_str(), fresh.describe().c_str(),
            describe_figures().c_str());
      }
    }
    state.plan = std::move(fresh);
    state.generation = generation_;
  }
  *plan = state.plan;
  ++state.calls;
  if (learning_) {
    const int explored = request.codec == nullptr ? exploration(*plan, state.calls) : -1;
    if (explored >= 0) {
      choose(request, explored, plan);
      ++explorations_;
      TERSE_TRACE("planner: %zu x %s: call %llu explores %s (best: %s)", request.count,
                  dtype_name(request.dtype), static_cast<unsigned long long>(state.calls),
                  plan->choice().c_str(),
                  plan->candidates[static_cast<size_t>(plan->best)].algorithm.c_str());
    }
  }
  return ncclSuccess;
}

void Planner::keep_unless_clearly_slower(const PlanRequest& request, const std::string& previous,
                                         CallPlan* fresh) const {
  const PlanCandidate& best = fresh->candidates[static_cast<size_t>(fresh->best)];
  for (size_t i = 0; i < fresh->candidates.size(); ++i) {
    const PlanCandidate& c = fresh->candidates[i];
    if (c.codec + " " + c.algorithm != previous) continue;
    if (c.prediction.seconds <= kKeepWithin * best.prediction.seconds) {
      fresh->best = static_cast<int>(i);
      choose(request, fresh->best, fresh);
    }
    return;
  }
}

void Planner::choose(const PlanRequest& request, int index, CallPlan* plan) const {
  plan->chosen = index;
  plan->codec = nullptr;
  plan->algorithm = plan->inner = nullptr;
  plan->stage_elements = 0;
  if (index < 0) return;
  const PlanCandidate& candidate = plan->candidates[static_cast<size_t>(index)];
  plan->codec = candidate.codec_object;
  plan->algorithm = candidate.run;
  plan->inner = candidate.inner;
  if (plan->codec != nullptr && plan->algorithm != nullptr) {
    plan->stage_elements = plan->algorithm->stage_elements(*plan->codec, request.count,
                                                           request.dtype, plan->group, plan->inner);
  }
}

ncclResult_t Planner::make_plan(const PlanRequest& request, CallPlan* plan) {
  *plan = CallPlan{};
  plan->piece_bytes = settings_.piece_bytes;
  plan->group = PeerGroup::whole(rank_, static_cast<int>(hosts_.size()));
  plan->group.hosts = hosts_;

  std::vector<Codec*> codecs;
  if (request.codec != nullptr) {
    codecs.push_back(request.codec);
  } else {
    for (const std::string& spec : auto_codec_candidates()) {
      Codec* codec = nullptr;
      TERSE_CHECK(make_codec_(spec, &codec));
      // Only the codecs whose bound can hold on some algorithm are worth measuring.
      const ErrorBound bound = codec->error_bound(request.count);
      if (relative_bound(bound, 1) <= request.max_rel_err) codecs.push_back(codec);
    }
  }
  TERSE_CHECK(speeds_of(codecs, request.may_agree));
  plan->agreed = std::all_of(codecs.begin(), codecs.end(),
                             [&](Codec* codec) { return agreed_.count(codec->spec()) != 0; });

  if (request.codec == nullptr) {
    // The uncompressed allreduce, as the communicator runs it (allreduce_selection.h and
    // TERSE_ALGO): candidate 0.
    const CodecFigures raw = figures_of(nullptr, request.count, request.dtype, false);
    const AlgorithmInfo* dense = dense_allreduce(request.count * dtype_size(request.dtype));
    PlanCandidate candidate;
    candidate.algorithm = std::string("dense_") + dense->name;
    candidate.prediction = predict(*dense, query(raw, settings_.dense_piece_bytes));
    plan->candidates.push_back(candidate);
  }
  for (Codec* codec : codecs) add_candidates(*codec, request, request.codec == nullptr, plan);
  if (plan->candidates.empty()) {
    // A fixed codec always has an algorithm; only a forced one that cannot run it leaves none.
    return fail(ncclInvalidArgument,
                "TERSE_COMPRESSED_ALGO=%s cannot run codec %s here (it needs another family, a "
                "codec without per-tensor state, or a communicator over several nodes; unset it "
                "to let terse choose)",
                settings_.forced != nullptr ? settings_.forced->name : "?",
                request.codec != nullptr ? request.codec->spec().c_str() : "auto");
  }
  int best = 0;
  for (size_t i = 1; i < plan->candidates.size(); ++i) {
    if (plan->candidates[i].prediction.seconds <
        plan->candidates[static_cast<size_t>(best)].prediction.seconds) {
      best = static_cast<int>(i);
    }
  }
  if (request.codec == nullptr && plan->candidates[static_cast<size_t>(best)].codec_object) {
    // auto: the uncompressed candidate comes first; compression must win clearly.
    if (plan->candidates[static_cast<size_t>(best)].prediction.seconds * kAutoMinGain >
        plan->candidates[0].prediction.seconds) {
      best = 0;
    }
  }
  plan->best = best;
  choose(request, best, plan);
  return ncclSuccess;
}

}  // namespace terse
