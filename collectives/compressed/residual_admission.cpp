// Residual admission in the compression engine (compression_engine.h, the file comment's 4.): the
// entry a plan asks residual memory for, and the path without memory (the rule's fallback codec or
// the dense allreduce) of a tensor the memory does not admit, with its WARN and statistics.
#include <cinttypes>
#include <string>

#include "collectives/compressed/compression_engine.h"
#include "collectives/compressed/compression_engine_internal.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {

bool CompressionEngine::needs_entry(const Plan& plan) const {
  return plan.decision.memory != MemoryKind::kNone ||
         plan.codec->stateful(plan.key.count, plan.dtype, plan.shape);
}

EntryOptions CompressionEngine::entry_options(const Plan& plan, Memory memory, void* stream) const {
  EntryOptions options;
  options.memory = memory;
  options.stream = stream;
  options.shape = plan.shape;
  if (plan.decision.memory == MemoryKind::kResidual) {
    options.stage_count = plan.call.stage_elements;
  }
  return options;
}

ncclResult_t CompressionEngine::switch_to_fallback(Plan* plan, bool may_agree, std::string* path) {
  const CodecChoice fallback = plan->decision.fallback;
  plan->compressed = false;
  *path = "uncompressed (the exact dense allreduce)";
  if (fallback.spec != "none") {
    Codec* codec = nullptr;
    TERSE_CHECK(codec_for(fallback.spec, fallback.name, fallback.params, &codec));
    Plan fallback_plan = *plan;
    if (plan_call(codec, 0, may_agree, &fallback_plan) == ncclSuccess) {
      plan->compressed = true;
      plan->codec = fallback_plan.codec;
      plan->algorithm = fallback_plan.algorithm;
      plan->call = fallback_plan.call;
      *path = "with its rule's fallback codec " + fallback.spec + " (memory none) through " +
              plan->algorithm->name;
    } else {
      *path += std::string(" (") + last_error() + ")";
    }
  }
  plan->decision.spec = fallback.spec;
  plan->decision.codec = fallback.name;
  plan->decision.params = fallback.params;
  plan->decision.memory = MemoryKind::kNone;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::fall_back(const Admission& admission, Plan* plan) {
  const TensorKey key = plan->key;
  const uint64_t cap = residuals_->max_bytes();
  std::string path;
  TERSE_CHECK(switch_to_fallback(plan, /*may_agree=*/true, &path));
  ++stats_.admission.fallback_calls;
  if (refused_.size() >= kMaxTrackedTensors) refused_.clear();
  auto [known, first] = refused_.emplace(key, true);
  if (!first) {
    if (!known->second) {
      known->second = true;
      TERSE_INFO("rank %d: residual memory does not admit %s again; reduced %s", transport_->rank(),
                 key.describe().c_str(), path.c_str());
    }
    return ncclSuccess;
  }
  ++stats_.admission.refused_tensors;
  if (admission.needed > cap) {
    TERSE_WARN("rank %d: residual memory does not admit %s: it needs %" PRIu64
               " bytes, more than the whole cap of %" PRIu64
               " bytes (TERSE_MEMORY_MAX_BYTES); it is reduced %s, without error feedback",
               transport_->rank(), key.describe().c_str(), admission.needed, cap, path.c_str());
  } else {
    TERSE_WARN("rank %d: residual memory does not admit %s: it needs %" PRIu64
               " bytes, and %" PRIu64 " of the cap of %" PRIu64
               " bytes (TERSE_MEMORY_MAX_BYTES) are held by tensors used in the last %" PRIu64
               " steps (TERSE_MEMORY_IDLE_STEPS); until it fits it is reduced %s, without error "
               "feedback",
               transport_->rank(), key.describe().c_str(), admission.needed, admission.in_use, cap,
               residuals_->idle_steps(), path.c_str());
  }
  return ncclSuccess;
}

void CompressionEngine::note_admitted(const TensorKey& key) {
  auto known = refused_.find(key);
  if (known == refused_.end() || !known->second) return;
  known->second = false;
  TERSE_INFO("rank %d: residual memory admits %s now: error feedback from here on",
             transport_->rank(), key.describe().c_str());
}

}  // namespace terse
