// The compression policy: which tensors are compressed, with which codec, memory and schedule
// (docs/design.md section 4). An ordered list of rules; the first rule whose match accepts a tensor
// decides for it (Distiller's overrides, AutoDist's per-variable strategies). No match means
// "none": the tensor is reduced exactly as NCCL would.
//
// Where a policy comes from:
//   TERSE_CODEC=name[:k=v,...][;fallback=name[:k=v,...]]
//                               one rule: every fp32/fp16/bf16 tensor reduced with sum or avg;
//                               memory by default_memory_kind() (memory_kind.h); the fallback
//                               of tensors residual memory did not admit (default none).
//   TERSE_POLICY=file.yaml      rules from a file; the format is documented at the top of
//                               policy_file.cpp, with an example in perf/policies/example.yaml.
// Both are validated when loaded (codecs are actually created), so a typo fails at init with
// the file, line and reason instead of at the first allreduce.
//
// A Policy is immutable once built; decide() is const and safe to call from many threads.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <re2/re2.h>

#include "codecs/codec_params.h"
#include "codecs/dtype.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "topology/link_class.h"  // LinkClass: rules match on it; tensors report intra or inter

namespace terse {

// The codec name that asks the cost model to choose (resolved by the collective layer's
// planner): the fastest codec whose stated error bound for the whole allreduce stays within
// max_rel_err ("auto:max_rel_err=0.05"; relative to the sum of the inputs' magnitudes, as
// collectives/compressed/compressed_error_bound.h states bounds), or none when nothing beats
// the uncompressed allreduce.
inline constexpr const char kAutoCodec[] = "auto";
inline constexpr const char kAutoMaxRelErr[] = "max_rel_err";
inline constexpr double kAutoDefaultMaxRelErr = 0.01;

// What the policy knows about one collective call.
struct TensorInfo {
  std::string name;            // C API name; "" for anonymous buffers
  uint64_t bytes = 0;          // count * element size
  std::optional<DType> dtype;  // empty: not a float type (integers, fp64, fp8): never compressed
  ncclRedOp_t op = ncclSum;
  int comm_size = 1;
  LinkClass link = LinkClass::kIntra;
  uint64_t step = 0;  // how many times this tensor was reduced before (schedules)
};

// Which tensors a rule accepts. Every field defaults to "any", except ops (sum and avg).
struct RuleMatch {
  static constexpr uint32_t kAllDTypes = (1u << kDTypeCount) - 1;
  static constexpr uint32_t bit(DType dtype) { return 1u << static_cast<unsigned>(dtype); }
  static constexpr uint32_t bit(ncclRedOp_t op) { return 1u << static_cast<unsigned>(op); }
  // The only reductions compression is defined for: lossy codecs approximate a sum (avg is a
  // scaled sum). max/min/prod of approximations is meaningless, so no rule may name them.
  static constexpr uint32_t kLinearOps = (1u << ncclSum) | (1u << ncclAvg);

  // Full match of the tensor name in RE2's syntax; unnamed tensors have name "". Absent: any
  // name, unnamed included. RE2 matches in time linear in the name whatever the pattern: a
  // backtracking matcher (std::regex) took over a minute per call on a pattern such as
  // "(a*)*(a*)*...b", and the policy is consulted on every allreduce.
  std::optional<std::string> name_pattern;     // as written, for messages
  std::shared_ptr<const re2::RE2> name_regex;  // compiled name_pattern (shared: RE2 cannot copy)
  // Tensor size in bytes, both bounds inclusive: min_bytes <= bytes <= max_bytes.
  uint64_t min_bytes = 0;
  uint64_t max_bytes = UINT64_MAX;
  uint32_t dtypes = kAllDTypes;  // bit(DType) set
  uint32_t ops = kLinearOps;     // bit(ncclRedOp_t) set, a subset of kLinearOps
  // Communicator size, both bounds inclusive.
  int min_comm_size = 1;
  int max_comm_size = INT32_MAX;
  LinkClass link = LinkClass::kAny;

  // Compiles `pattern`; refuses an invalid regular expression, naming it and why.
  ncclResult_t set_name_pattern(const std::string& pattern);
  // Refuses anything but sum and avg (see kLinearOps), naming the op; refuses an empty list.
  ncclResult_t set_ops(const std::vector<ncclRedOp_t>& list);
  // Refuses an empty list.
  ncclResult_t set_dtypes(const std::vector<DType>& list);
  // Refuses min > max for bytes or comm size, and comm sizes below 1.
  ncclResult_t validate() const;

  bool matches(const TensorInfo& info) const;
};

// When a rule compresses: from step `start` up to `end` (exclusive; 0 = forever), every
// `every`-th step, with a warm-up ramp over the first `warmup` active steps.
struct Schedule {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t every = 1;
  uint64_t warmup = 0;

  // Refuses every == 0 and an end at or before start (a rule that could never be active).
  ncclResult_t validate() const;
  // start <= step, step < end (unless end is 0), and (step - start) divisible by every.
  bool active(uint64_t step) const;
  // For an active step: (n + 1) / warmup where n = (step - start) / every counts the active steps
  // before it, while n < warmup; 1 afterwards or when warmup is 0. With every = 1 this is
  // (step - start + 1) / warmup. Values lie in (0, 1] (EncodeContext::warmup_progress).
  double warmup_progress(uint64_t step) const;
};

// A codec as a rule gives it, validated by creating it once.
struct CodecChoice {
  std::string spec = "none";  // canonical (Codec::spec(), every parameter spelled out), or "auto"
  std::string name = "none";  // registry name, or "auto"
  CodecParams params;         // as written, for the collective layer's create_codec()
  MemoryKind memory = MemoryKind::kNone;
  double max_rel_err = kAutoDefaultMaxRelErr;  // `auto` only: the bound its choice must keep

  // Creates codec `name` with `params` (unknown codecs and parameters are refused with the
  // registry's message) and settles the memory: `memory` when given, else
  // default_memory_kind(). Refuses memory 'momentum' for codecs other than dgc, memory other
  // than 'none' for the lossless codec 'none', and memory 'residual' for codecs not stable under
  // error feedback (Codec::stable_under_error_feedback). `auto` takes no parameters; its memory
  // defaults to residual and may not be momentum. `auto` takes one parameter, max_rel_err.
  static ncclResult_t make(const std::string& name, const CodecParams& params,
                           const std::optional<MemoryKind>& memory, CodecChoice* choice);

  // A rule's `fallback`: the codec a call runs when its tensor was not admitted to residual
  // memory (its cap is full of tensors in use), with memory none. Refuses `auto`, codecs that
  // keep per-tensor state (dgc, powersgd: they would need the memory that was refused) and
  // codecs that are not Codec::unbiased() (without error feedback a biased codec loses the same
  // part of a persistent gradient every step). `none` (uncompressed) is the default.
  static ncclResult_t make_fallback(const std::string& name, const CodecParams& params,
                                    CodecChoice* choice);
};

struct PolicyRule {
  RuleMatch match;
  CodecChoice codec;
  // What a call of a tensor without residual memory (not admitted) runs: "none" (the dense
  // allreduce, exactly) unless the rule names a fallback codec (CodecChoice::make_fallback).
  CodecChoice fallback;
  Schedule schedule;
  // What parameter-server receives of the tensors it matches travel through (terse.h,
  // tersePsTensorDesc::receive_codec; key `ps_receive`): a canonical codec spec, "none" (exact)
  // unless the rule names one. Receives have no schedule and no feedback.
  std::string ps_receive = "none";
  std::string origin;  // where it was written, for logs: "policy.yaml:12", "TERSE_CODEC"
};

// What decide() says about one call.
struct Decision {
  std::string spec = "none";   // canonical codec spec (CodecChoice::spec), "auto" or "none"
  std::string codec = "none";  // codec name
  CodecParams params;
  MemoryKind memory = MemoryKind::kNone;
  double max_rel_err = kAutoDefaultMaxRelErr;  // for codec "auto" (CodecChoice::max_rel_err)
  // The rule's fallback (PolicyRule::fallback): spec "none" when it names none.
  CodecChoice fallback;
  double warmup_progress = 1.0;  // for EncodeContext::warmup_progress
  int rule = -1;                 // index of the matching rule, -1 when none matched
  bool scheduled = false;        // the matching rule's schedule is active at this step; when a rule
                                 // matched but its schedule is not, the decision is "none"
  // The matching rule's PolicyRule::ps_receive, whatever its schedule.
  std::string ps_receive = "none";

  // False for "none" (plain NCCL reduction). True for "auto" too: the cost model may still
  // choose none.
  bool compressed() const { return codec != "none"; }
};

class Policy {
 public:
  // An empty policy: nothing is compressed.
  Policy() = default;

  // Appends a rule (tried after the ones before it). Re-checks the match's and the schedule's
  // invariants and the fallback (CodecChoice::make_fallback) so hand-built rules cannot bypass
  // what files are held to.
  ncclResult_t add_rule(PolicyRule rule);

  // The first rule whose match accepts `info`, with its schedule applied. Tensors without a
  // float dtype never match.
  Decision decide(const TensorInfo& info) const;

  const std::vector<PolicyRule>& rules() const { return rules_; }

  // The TERSE_CODEC shorthand: one rule, codec `spec` ("name" or "name:k=v,..."), matching
  // every float tensor reduced with sum or avg, always active. "spec;fallback=spec2" also names
  // the rule's fallback (e.g. "sign;fallback=qsgd:levels=15").
  static ncclResult_t from_codec_spec(const std::string& spec, Policy* policy);
  // A YAML policy (format: policy_file.cpp); `source` names it in errors ("file:line: ...").
  static ncclResult_t from_yaml(const std::string& text, const std::string& source, Policy* policy);
  // Reads and parses a YAML policy file.
  static ncclResult_t from_file(const std::string& path, Policy* policy);

 private:
  std::vector<PolicyRule> rules_;
};

}  // namespace terse
