// Which codec and algorithm the compression engine (compression_engine.h) gives a call: the
// tensor's key and step, the policy's decision, the planner's plan, and the predictions made of
// it without running (decide()'s plan, predicts_backend, simulate), with the first decisions' log.
#include <algorithm>
#include <string>

#include "codecs/codec_registry.h"
#include "collectives/compressed/compression_engine.h"
#include "collectives/compressed/compression_engine_internal.h"
#include "common/counter_rng.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace {

// The matrix view a tensor request gives: shape[0] x the product of the rest.
MatrixShape shape_of(const TensorRequest* tensor, size_t count) {
  if (tensor == nullptr || tensor->shape.size() < 2) return MatrixShape{};
  size_t cols = 1;
  for (size_t d = 1; d < tensor->shape.size(); ++d) cols *= static_cast<size_t>(tensor->shape[d]);
  const size_t rows = static_cast<size_t>(tensor->shape[0]);
  if (rows * cols != count) return MatrixShape{};
  return MatrixShape{rows, cols};
}

}  // namespace

ncclResult_t CompressionEngine::codec_for(const std::string& spec, const std::string& name,
                                          const CodecParams& params, Codec** codec) {
  auto found = codecs_.find(spec);
  if (found == codecs_.end()) {
    CodecParams consumed = params;
    std::unique_ptr<Codec> made;
    TERSE_CHECK(create_codec(name, consumed, &made));
    found = codecs_.emplace(spec, std::move(made)).first;
  }
  *codec = found->second.get();
  return ncclSuccess;
}

ncclResult_t CompressionEngine::plan(const CollectiveArgs& args, bool may_agree,
                                     const PendingSteps* pending, Plan* plan) {
  *plan = Plan{};
  const TensorRequest* tensor = args.tensor.get();
  plan->key.comm = comm_id_;
  plan->key.address =
      args.tensor_address != 0 ? args.tensor_address : reinterpret_cast<uint64_t>(args.recv);
  plan->key.count = args.count;
  if (tensor != nullptr) plan->key.name = tensor->name;
  const auto step = steps_.find(plan->key);
  plan->step = step == steps_.end() ? 0 : step->second.calls;
  if (pending != nullptr) {
    const auto ahead = pending->steps_.find(plan->key);
    if (ahead != pending->steps_.end()) plan->step += ahead->second;
  }

  TensorInfo info;
  info.name = plan->key.name;
  info.bytes = args.count * nccl_type_size(args.type);
  DType dtype = DType::kFloat32;
  if (dtype_from_nccl(args.type, &dtype)) info.dtype = dtype;
  plan->key.dtype = dtype;
  plan->dtype = dtype;
  const bool linear = args.op.kind == ReduceKind::kSum && (!args.op.scale_input || args.op.average);
  info.op = args.op.average ? ncclAvg : ncclSum;
  info.comm_size = transport_->nranks();
  info.link = link_;
  info.step = plan->step;

  if (tensor != nullptr && !tensor->codec.empty()) {
    TERSE_CHECK(decide_with_spec(tensor->codec, info, &plan->decision));
  } else {
    plan->decision = policy_.decide(info);
  }
  if (!info.dtype || !linear) {
    plan->why = "not a float sum or average";
    return ncclSuccess;
  }
  if (!plan->decision.compressed()) {
    plan->why = plan->decision.rule < 0 ? "no rule matches" : "the rule says none now";
    return ncclSuccess;
  }
  if (args.count == 0 || transport_->nranks() == 1) {
    plan->why = args.count == 0 ? "empty" : "one rank";
    return ncclSuccess;
  }
  plan->shape = shape_of(tensor, args.count);
  if (plan->decision.codec == kAutoCodec) {
    plan->automatic = true;
    TERSE_CHECK(plan_call(nullptr, plan->decision.max_rel_err, may_agree, plan));
    if (plan->codec == nullptr) {
      plan->why = "auto: the uncompressed allreduce is predicted fastest, " + plan->call.describe();
      plan->decision.spec = plan->decision.codec = "none";
      return ncclSuccess;
    }
    // The chosen codec as a rule of its own would give it, with auto's memory and schedule.
    const Decision automatic = plan->decision;
    TERSE_CHECK(decide_with_spec(plan->codec->spec(), info, &plan->decision));
    plan->decision.memory = automatic.memory;
    plan->decision.rule = automatic.rule;
    plan->decision.warmup_progress = automatic.warmup_progress;
    plan->decision.fallback = automatic.fallback;
  } else {
    Codec* codec = nullptr;
    TERSE_CHECK(
        codec_for(plan->decision.spec, plan->decision.codec, plan->decision.params, &codec));
    TERSE_CHECK(plan_call(codec, 0, may_agree, plan));
  }
  plan->compressed = true;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::plan_call(Codec* codec, double max_rel_err, bool may_agree,
                                          Plan* plan) {
  PlanRequest request;
  request.count = plan->key.count;
  request.dtype = plan->dtype;
  request.codec = codec;
  request.max_rel_err = max_rel_err;
  request.error_feedback = plan->decision.memory == MemoryKind::kResidual;
  request.may_agree = may_agree;
  plan->request = request;
  TERSE_CHECK(planner_->plan(request, &plan->call));
  plan->codec = plan->call.codec;
  plan->algorithm = plan->call.algorithm;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::decide_with_spec(const std::string& spec, const TensorInfo& info,
                                                 Decision* decision) {
  // Parsed once per distinct spec: a per-call codec is usually the same every step.
  auto found = one_rule_policies_.find(spec);
  if (found == one_rule_policies_.end()) {
    Policy policy;
    TERSE_CHECK(Policy::from_codec_spec(spec, &policy));
    found = one_rule_policies_.emplace(spec, std::move(policy)).first;
  }
  *decision = found->second.decide(info);
  return ncclSuccess;
}

ncclResult_t CompressionEngine::predict(const CollectiveArgs& args, const PendingSteps* pending,
                                        Plan* out) {
  Plan& plan = *out;
  TERSE_CHECK(this->plan(args, /*may_agree=*/false, pending, &plan));
  // As allreduce() would find residual memory at that step (an entry of the tensor that exists
  // counts as admitted).
  if (plan.compressed && needs_entry(plan) && !residuals_->contains(plan.key)) {
    const uint64_t bytes = ResidualMemory::entry_bytes(plan.key, *plan.codec, plan.decision.memory,
                                                       entry_options(plan));
    if (!residuals_->would_admit(bytes, std::max(comm_step_, step_base_ + plan.step))) {
      std::string path;
      TERSE_CHECK(switch_to_fallback(&plan, /*may_agree=*/false, &path));
    }
  }
  return ncclSuccess;
}

ncclResult_t CompressionEngine::predicts_backend(const CollectiveArgs& args, bool* backend) {
  *backend = false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (policy_.rules().empty() && args.tensor == nullptr) return ncclSuccess;
  Plan plan;
  TERSE_CHECK(predict(args, /*pending=*/nullptr, &plan));
  *backend = plan.compressed;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::simulate(const CollectiveArgs& args, const char* dense_algorithm,
                                         PendingSteps* pending, double* seconds) {
  *seconds = 0;
  if (args.count == 0) return ncclSuccess;  // nothing moves
  std::lock_guard<std::mutex> lock(mutex_);
  if (args.kind == CollectiveKind::kAllReduce &&
      (!policy_.rules().empty() || args.tensor != nullptr)) {
    Plan plan;
    TERSE_CHECK(predict(args, pending, &plan));
    ++pending->steps_[plan.key];
    if (plan.compressed) {
      *seconds = plan.call.candidates[static_cast<size_t>(plan.call.chosen)].prediction.seconds;
      return ncclSuccess;
    }
  }
  *seconds = planner_->predict_uncompressed(args.kind, dense_algorithm, args.count,
                                            nccl_type_size(args.type));
  return ncclSuccess;
}

size_t CompressionEngine::LoggedPlanHash::operator()(const LoggedPlan& logged) const {
  uint64_t hash = TensorIdentityHash()(logged.key);
  hash = mix64(hash ^ logged.key.count);
  return static_cast<size_t>(mix64(hash ^ static_cast<uint64_t>(logged.type)));
}

void CompressionEngine::log_first_decision(const Plan& plan, const CollectiveArgs& args) {
  if (logged_.size() >= kMaxTrackedTensors) logged_.clear();
  if (!logged_.insert(LoggedPlan{plan.key, args.type}).second) return;
  if (plan.compressed) {
    TERSE_INFO("rank %d: %s: codec %s (rule %d, memory %s), algorithm %s%s%s; plan: %s",
               transport_->rank(), plan.key.describe().c_str(), plan.codec->spec().c_str(),
               plan.decision.rule, memory_kind_name(plan.decision.memory), plan.algorithm->name,
               plan.call.inner != nullptr ? " around " : "",
               plan.call.inner != nullptr ? plan.call.inner->name : "",
               plan.call.describe().c_str());
  } else {
    TERSE_INFO("rank %d: %s (%s x %zu): uncompressed, %s", transport_->rank(),
               plan.key.describe().c_str(), nccl_type_name(args.type), args.count,
               plan.why.c_str());
  }
}

}  // namespace terse
