#include "collectives/compressed/policy/policy.h"

#include <cstdio>
#include <memory>
#include <utility>

#include "codecs/codec_registry.h"
#include "common/env.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

const char* op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "sum";
    case ncclProd:
      return "prod";
    case ncclMax:
      return "max";
    case ncclMin:
      return "min";
    case ncclAvg:
      return "avg";
    default:
      return "custom";
  }
}

// Re-records the current error with `prefix` in front, keeping its code.
ncclResult_t refuse_with_prefix(ncclResult_t code, const std::string& prefix) {
  std::string reason = last_error();
  return fail(code, "%s: %s", prefix.c_str(), reason.c_str());
}

}  // namespace

ncclResult_t RuleMatch::set_name_pattern(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);  // the refusal below says it once, in terse's words
  auto compiled = std::make_shared<const re2::RE2>(pattern, options);
  if (!compiled->ok()) {
    return fail(ncclInvalidArgument, "name '%s' is not a valid regular expression (%s)",
                pattern.c_str(), compiled->error().c_str());
  }
  name_regex = std::move(compiled);
  name_pattern = pattern;
  return ncclSuccess;
}

ncclResult_t RuleMatch::set_ops(const std::vector<ncclRedOp_t>& list) {
  if (list.empty()) return fail(ncclInvalidArgument, "op: the list of reductions is empty");
  uint32_t set = 0;
  for (ncclRedOp_t op : list) {
    if (op != ncclSum && op != ncclAvg) {
      return fail(ncclInvalidArgument,
                  "op '%s' cannot be compressed: codecs approximate a sum, and the %s of "
                  "approximations is meaningless (only sum and avg may be compressed)",
                  op_name(op), op_name(op));
    }
    set |= bit(op);
  }
  ops = set;
  return ncclSuccess;
}

ncclResult_t RuleMatch::set_dtypes(const std::vector<DType>& list) {
  if (list.empty()) return fail(ncclInvalidArgument, "dtype: the list of types is empty");
  uint32_t set = 0;
  for (DType dtype : list) set |= bit(dtype);
  dtypes = set;
  return ncclSuccess;
}

ncclResult_t RuleMatch::validate() const {
  if (min_bytes > max_bytes) {
    return fail(ncclInvalidArgument, "min_bytes %llu exceeds max_bytes %llu: nothing could match",
                static_cast<unsigned long long>(min_bytes),
                static_cast<unsigned long long>(max_bytes));
  }
  if (min_comm_size < 1 || min_comm_size > max_comm_size) {
    return fail(ncclInvalidArgument,
                "comm_size {min: %d, max: %d} is empty or below 1: nothing could match",
                min_comm_size, max_comm_size);
  }
  if (ops == 0 || (ops & ~kLinearOps) != 0) {
    return fail(ncclInvalidArgument, "op set 0x%x must be a non-empty subset of {sum, avg}", ops);
  }
  if (dtypes == 0 || (dtypes & ~kAllDTypes) != 0) {
    return fail(ncclInvalidArgument, "dtype set 0x%x must be a non-empty set of float types",
                dtypes);
  }
  return ncclSuccess;
}

bool RuleMatch::matches(const TensorInfo& info) const {
  if (!info.dtype || (dtypes & bit(*info.dtype)) == 0) return false;
  // Custom (PreMulSum) ops have dynamic values past the built-in ones: never matched.
  if (info.op < 0 || info.op >= ncclNumOps || (ops & bit(info.op)) == 0) return false;
  if (info.bytes < min_bytes || info.bytes > max_bytes) return false;
  if (info.comm_size < min_comm_size || info.comm_size > max_comm_size) return false;
  if (link != LinkClass::kAny && info.link != link) return false;
  // Last: the only test that costs more than a comparison.
  return !name_pattern || RE2::FullMatch(info.name, *name_regex);
}

ncclResult_t Schedule::validate() const {
  if (every == 0) return fail(ncclInvalidArgument, "schedule: every must be at least 1, not 0");
  if (end != 0 && end <= start) {
    return fail(ncclInvalidArgument,
                "schedule: end %llu is not after start %llu, so the rule would never be active "
                "(end is exclusive; 0 means forever)",
                static_cast<unsigned long long>(end), static_cast<unsigned long long>(start));
  }
  return ncclSuccess;
}

bool Schedule::active(uint64_t step) const {
  if (step < start || (end != 0 && step >= end)) return false;
  return (step - start) % every == 0;
}

double Schedule::warmup_progress(uint64_t step) const {
  if (warmup == 0 || step < start) return 1.0;
  uint64_t earlier_active_steps = (step - start) / every;
  if (earlier_active_steps >= warmup) return 1.0;
  return static_cast<double>(earlier_active_steps + 1) / static_cast<double>(warmup);
}

ncclResult_t CodecChoice::make(const std::string& name, const CodecParams& params,
                               const std::optional<MemoryKind>& memory, CodecChoice* choice) {
  CodecChoice made;
  made.name = name;
  made.params = params;
  if (name == kAutoCodec) {
    // One parameter: the error the result may carry (the planner's choice among codecs).
    CodecParams consumed = params;
    double max_rel_err = kAutoDefaultMaxRelErr;
    TERSE_CHECK(consumed.get_double(kAutoMaxRelErr, kAutoDefaultMaxRelErr, 0.0, 1e6, &max_rel_err));
    if (consumed.finish() != ncclSuccess) {
      return fail(ncclInvalidArgument,
                  "codec 'auto' takes one parameter, %s (the error bound the result may carry, "
                  "relative to the sum of the inputs' magnitudes; default %g): the cost model "
                  "picks the codec and its parameters",
                  kAutoMaxRelErr, kAutoDefaultMaxRelErr);
    }
    made.max_rel_err = max_rel_err;
    made.spec = kAutoCodec;
    if (params.has(kAutoMaxRelErr)) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", max_rel_err);
      made.spec += std::string(":") + kAutoMaxRelErr + "=" + value;
    }
    made.memory = memory.value_or(MemoryKind::kResidual);
    if (made.memory == MemoryKind::kMomentum) {
      return fail(ncclInvalidArgument,
                  "memory 'momentum' needs codec dgc, and codec 'auto' may choose another; use "
                  "memory residual or none");
    }
    *choice = std::move(made);
    return ncclSuccess;
  }

  CodecParams consumed = params;  // factories record which keys they read
  std::unique_ptr<Codec> codec;
  TERSE_CHECK(create_codec(name, consumed, &codec));
  made.spec = codec->spec();
  made.memory = memory.value_or(default_memory_kind(*codec));
  if (made.memory == MemoryKind::kResidual && !codec->stable_under_error_feedback()) {
    return fail(ncclInvalidArgument,
                "memory 'residual' with codec '%s': its error is not smaller than what it encodes "
                "(an unbiased scaling), so a residual fed back through it grows every step "
                "instead of shrinking; use memory none%s",
                codec->spec().c_str(),
                codec->id() == CodecId::kRandomK ? ", or randomk with unbiased=false" : "");
  }
  if (made.memory == MemoryKind::kMomentum && codec->id() != CodecId::kDgc) {
    return fail(ncclInvalidArgument,
                "memory 'momentum' is DGC's momentum correction, which codec '%s' does not do "
                "(use memory residual or none)",
                name.c_str());
  }
  if (made.memory != MemoryKind::kNone && codec->id() == CodecId::kNone) {
    return fail(ncclInvalidArgument,
                "memory '%s' with codec 'none' would keep nothing: codec none is lossless (use "
                "memory none)",
                memory_kind_name(made.memory));
  }
  *choice = std::move(made);
  return ncclSuccess;
}

ncclResult_t CodecChoice::make_fallback(const std::string& name, const CodecParams& params,
                                        CodecChoice* choice) {
  if (name == kAutoCodec) {
    return fail(ncclInvalidArgument,
                "fallback 'auto': a fallback must be a fixed codec, the same on every rank (an "
                "unbiased one such as qsgd, or none)");
  }
  CodecChoice made;
  TERSE_CHECK(make(name, params, MemoryKind::kNone, &made));
  std::unique_ptr<Codec> codec;
  CodecParams consumed = params;
  TERSE_CHECK(create_codec(name, consumed, &codec));
  // A square view, so that a low-rank codec shows the state it would keep.
  if (codec->stateful(4096, DType::kFloat32, MatrixShape{64, 64})) {
    return fail(ncclInvalidArgument,
                "fallback '%s' keeps per-tensor state, which needs the residual memory that the "
                "tensor was refused; name a stateless codec (qsgd, terngrad, fp16, bf16, ...) or "
                "none",
                made.spec.c_str());
  }
  if (!codec->unbiased()) {
    return fail(ncclInvalidArgument,
                "fallback '%s' is biased, and a fallback runs without error feedback, so it would "
                "drop the same part of a persistent gradient every step; name an unbiased codec "
                "(qsgd, terngrad with clip=0, randomk with unbiased=true, int8 with "
                "rounding=stochastic), a cast (fp16, bf16), or none",
                made.spec.c_str());
  }
  *choice = std::move(made);
  return ncclSuccess;
}

ncclResult_t Policy::add_rule(PolicyRule rule) {
  const char* origin = rule.origin.empty() ? "rule" : rule.origin.c_str();
  if (rule.match.validate() != ncclSuccess || rule.schedule.validate() != ncclSuccess) {
    return refuse_with_prefix(ncclInvalidArgument, origin);
  }
  CodecChoice fallback;
  if (rule.fallback.spec != "none" &&
      CodecChoice::make_fallback(rule.fallback.name, rule.fallback.params, &fallback) !=
          ncclSuccess) {
    return refuse_with_prefix(ncclInvalidArgument, origin);
  }
  rules_.push_back(std::move(rule));
  return ncclSuccess;
}

Decision Policy::decide(const TensorInfo& info) const {
  Decision decision;
  if (!info.dtype) return decision;  // integers and other types are never compressed
  for (size_t index = 0; index < rules_.size(); ++index) {
    const PolicyRule& rule = rules_[index];
    if (!rule.match.matches(info)) continue;
    decision.rule = static_cast<int>(index);
    decision.ps_receive = rule.ps_receive;
    if (!rule.schedule.active(info.step)) return decision;  // first match wins, even when off
    decision.scheduled = true;
    decision.spec = rule.codec.spec;
    decision.codec = rule.codec.name;
    decision.params = rule.codec.params;
    decision.memory = rule.codec.memory;
    decision.max_rel_err = rule.codec.max_rel_err;
    decision.fallback = rule.fallback;
    decision.warmup_progress = rule.schedule.warmup_progress(info.step);
    return decision;
  }
  return decision;
}

ncclResult_t Policy::from_codec_spec(const std::string& spec, Policy* policy) {
  // "codec;fallback=codec": a codec spec never holds ';' (parameters are comma-separated).
  static const std::string kFallbackKey = "fallback=";
  const size_t semicolon = spec.find(';');
  std::string name;
  CodecParams params;
  TERSE_CHECK(parse_codec_spec(spec.substr(0, semicolon), &name, &params));
  PolicyRule rule;
  TERSE_CHECK(CodecChoice::make(name, params, std::nullopt, &rule.codec));
  if (semicolon != std::string::npos) {
    const std::string rest = spec.substr(semicolon + 1);
    if (rest.compare(0, kFallbackKey.size(), kFallbackKey) != 0) {
      return fail(ncclInvalidArgument,
                  "codec spec '%s': after ';' expected fallback=<codec spec>, found '%s'",
                  spec.c_str(), rest.c_str());
    }
    std::string fallback_name;
    CodecParams fallback_params;
    TERSE_CHECK(
        parse_codec_spec(rest.substr(kFallbackKey.size()), &fallback_name, &fallback_params));
    TERSE_CHECK(CodecChoice::make_fallback(fallback_name, fallback_params, &rule.fallback));
  }
  rule.origin = "TERSE_CODEC";
  Policy made;
  TERSE_CHECK(made.add_rule(std::move(rule)));
  *policy = std::move(made);
  return ncclSuccess;
}

}  // namespace terse
