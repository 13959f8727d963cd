// The compression policy: every matcher, first match wins, schedules and warm-up, codec
// validation, memory defaults and fallbacks, the TERSE_CODEC / TERSE_POLICY environment, and YAML
// files (the example file, and bad files refused with their line and reason).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/agreed_settings.h"
#include "collectives/compressed/policy/policy.h"
#include "common/result.h"

namespace terse {
namespace {

// A sum over `bytes` of fp32 on 8 ranks across nodes at step 0, unless changed.
TensorInfo tensor(const std::string& name = "", uint64_t bytes = 1 << 20) {
  TensorInfo info;
  info.name = name;
  info.bytes = bytes;
  info.dtype = DType::kFloat32;
  info.op = ncclSum;
  info.comm_size = 8;
  info.link = LinkClass::kInter;
  info.step = 0;
  return info;
}

PolicyRule rule_for(const std::string& codec, const RuleMatch& match = RuleMatch()) {
  PolicyRule rule;
  rule.match = match;
  CodecParams params(codec);
  EXPECT_EQ(CodecChoice::make(codec, params, std::nullopt, &rule.codec), ncclSuccess)
      << last_error();
  return rule;
}

Policy policy_of(std::vector<PolicyRule> rules) {
  Policy policy;
  for (PolicyRule& rule : rules) EXPECT_EQ(policy.add_rule(std::move(rule)), ncclSuccess);
  return policy;
}

// Whether one rule with `match` accepts `info`.
bool accepts(const RuleMatch& match, const TensorInfo& info) {
  return policy_of({rule_for("fp16", match)}).decide(info).rule == 0;
}

std::string error_text() {
  return last_error();
}

// ---------------------------------------------------------------------------------------------
// Deciding

TEST(Policy, EmptyPolicyCompressesNothing) {
  Policy policy;
  Decision decision = policy.decide(tensor("w"));
  EXPECT_FALSE(decision.compressed());
  EXPECT_EQ(decision.codec, "none");
  EXPECT_EQ(decision.spec, "none");
  EXPECT_EQ(decision.memory, MemoryKind::kNone);
  EXPECT_EQ(decision.rule, -1);
  EXPECT_FALSE(decision.scheduled);
}

TEST(Policy, FirstMatchingRuleWins) {
  RuleMatch encoder;
  ASSERT_EQ(encoder.set_name_pattern("encoder\\..*"), ncclSuccess);
  Policy policy = policy_of({rule_for("fp16", encoder), rule_for("bf16"), rule_for("none")});
  Decision first = policy.decide(tensor("encoder.w"));
  EXPECT_EQ(first.rule, 0);
  EXPECT_EQ(first.codec, "fp16");
  EXPECT_TRUE(first.compressed());
  Decision second = policy.decide(tensor("decoder.w"));
  EXPECT_EQ(second.rule, 1);  // the catch-all bf16, never the later none
  EXPECT_EQ(second.codec, "bf16");
  EXPECT_EQ(second.spec, "bf16");
}

TEST(Policy, DecisionCarriesTheCanonicalSpecAndMemory) {
  Policy policy = policy_of({rule_for("fp16")});
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(create_codec("fp16", &codec), ncclSuccess);
  Decision decision = policy.decide(tensor());
  EXPECT_EQ(decision.spec, codec->spec());
  EXPECT_EQ(decision.memory, MemoryKind::kNone);  // casts keep no residual by default
  EXPECT_EQ(decision.warmup_progress, 1.0);
  EXPECT_TRUE(decision.scheduled);
}

TEST(Policy, TensorsWithoutAFloatTypeAreNeverCompressed) {
  Policy policy = policy_of({rule_for("fp16")});
  TensorInfo integers = tensor();
  integers.dtype.reset();
  EXPECT_EQ(policy.decide(integers).rule, -1);
  EXPECT_FALSE(policy.decide(integers).compressed());
}

// ---------------------------------------------------------------------------------------------
// Matchers

TEST(PolicyMatch, NameIsAFullRegexMatch) {
  RuleMatch match;
  ASSERT_EQ(match.set_name_pattern("enc"), ncclSuccess);
  EXPECT_FALSE(accepts(match, tensor("encoder")));  // a prefix is not enough
  EXPECT_TRUE(accepts(match, tensor("enc")));
  ASSERT_EQ(match.set_name_pattern("enc.*|dec[0-9]+"), ncclSuccess);
  EXPECT_TRUE(accepts(match, tensor("encoder.layer1")));
  EXPECT_TRUE(accepts(match, tensor("dec12")));
  EXPECT_FALSE(accepts(match, tensor("dec")));
  EXPECT_FALSE(accepts(match, tensor("")));  // unnamed tensors have the name ""
}

TEST(PolicyMatch, UnnamedTensorsMatchNoPatternOrOneThatAcceptsTheEmptyName) {
  EXPECT_TRUE(accepts(RuleMatch(), tensor("")));
  EXPECT_TRUE(accepts(RuleMatch(), tensor("anything")));
  RuleMatch empty_ok;
  ASSERT_EQ(empty_ok.set_name_pattern(".*"), ncclSuccess);
  EXPECT_TRUE(accepts(empty_ok, tensor("")));
}

TEST(PolicyMatch, APatternThatMakesBacktrackingExplodeStillMatchesInLinearTime) {
  // "(a*)*" thirty times then "b": a backtracking matcher (std::regex) tries every way of
  // splitting the a's between the groups; at 20 groups it took over a minute to reject a
  // 40-character name, and a policy is consulted on every allreduce. RE2 answers at once; with
  // a backtracker this test runs into CTest's timeout.
  std::string pattern;
  for (int i = 0; i < 30; ++i) pattern += "(a*)*";
  pattern += "b";
  RuleMatch match;
  ASSERT_EQ(match.set_name_pattern(pattern), ncclSuccess);
  const std::string a_run(40, 'a');
  EXPECT_FALSE(accepts(match, tensor(a_run)));
  EXPECT_TRUE(accepts(match, tensor(a_run + "b")));
  // A backreference is what linear time gives up: refused by name, not silently different.
  EXPECT_EQ(match.set_name_pattern("(enc)\\1"), ncclInvalidArgument);
}

TEST(PolicyMatch, InvalidRegexIsRefused) {
  RuleMatch match;
  EXPECT_EQ(match.set_name_pattern("enc(oder"), ncclInvalidArgument);
  EXPECT_NE(error_text().find("'enc(oder' is not a valid regular expression"), std::string::npos)
      << error_text();
  EXPECT_FALSE(match.name_pattern.has_value());
}

TEST(PolicyMatch, ByteBoundsAreBothInclusive) {
  RuleMatch match;
  match.min_bytes = 1024;
  match.max_bytes = 4096;
  EXPECT_FALSE(accepts(match, tensor("", 1023)));
  EXPECT_TRUE(accepts(match, tensor("", 1024)));
  EXPECT_TRUE(accepts(match, tensor("", 4096)));
  EXPECT_FALSE(accepts(match, tensor("", 4097)));
  RuleMatch exact;
  exact.min_bytes = exact.max_bytes = 64;
  EXPECT_TRUE(accepts(exact, tensor("", 64)));
}

TEST(PolicyMatch, DtypeSet) {
  RuleMatch match;
  ASSERT_EQ(match.set_dtypes({DType::kBFloat16, DType::kFloat16}), ncclSuccess);
  TensorInfo info = tensor();
  EXPECT_FALSE(accepts(match, info));
  info.dtype = DType::kBFloat16;
  EXPECT_TRUE(accepts(match, info));
  info.dtype = DType::kFloat16;
  EXPECT_TRUE(accepts(match, info));
  EXPECT_EQ(match.set_dtypes({}), ncclInvalidArgument);
}

TEST(PolicyMatch, OnlySumAndAvgAreMatchedByDefault) {
  RuleMatch match;
  TensorInfo info = tensor();
  for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
    info.op = op;
    EXPECT_TRUE(accepts(match, info)) << op;
  }
  for (ncclRedOp_t op : {ncclProd, ncclMax, ncclMin, static_cast<ncclRedOp_t>(ncclNumOps + 3)}) {
    info.op = op;
    EXPECT_FALSE(accepts(match, info)) << op;
  }
}

TEST(PolicyMatch, OpSetNarrowsAndRefusesNonLinearOps) {
  RuleMatch match;
  ASSERT_EQ(match.set_ops({ncclAvg}), ncclSuccess);
  TensorInfo info = tensor();
  EXPECT_FALSE(accepts(match, info));
  info.op = ncclAvg;
  EXPECT_TRUE(accepts(match, info));
  for (ncclRedOp_t op : {ncclProd, ncclMax, ncclMin}) {
    EXPECT_EQ(match.set_ops({ncclSum, op}), ncclInvalidArgument);
    EXPECT_NE(error_text().find("cannot be compressed"), std::string::npos) << error_text();
  }
  EXPECT_EQ(match.ops, RuleMatch::bit(ncclAvg));  // unchanged by the refusals
  EXPECT_EQ(match.set_ops({}), ncclInvalidArgument);
  // A hand-built rule cannot sneak max in either.
  PolicyRule rule = rule_for("fp16");
  rule.match.ops |= RuleMatch::bit(ncclMax);
  Policy policy;
  EXPECT_EQ(policy.add_rule(rule), ncclInvalidArgument);
}

TEST(PolicyMatch, CommSizeBoundsAreInclusive) {
  RuleMatch match;
  match.min_comm_size = 4;
  match.max_comm_size = 16;
  TensorInfo info = tensor();
  for (int size : {1, 3, 17, 1024}) {
    info.comm_size = size;
    EXPECT_FALSE(accepts(match, info)) << size;
  }
  for (int size : {4, 8, 16}) {
    info.comm_size = size;
    EXPECT_TRUE(accepts(match, info)) << size;
  }
}

TEST(PolicyMatch, LinkClass) {
  TensorInfo intra = tensor();
  intra.link = LinkClass::kIntra;
  TensorInfo inter = tensor();
  inter.link = LinkClass::kInter;
  RuleMatch any, only_intra, only_inter;
  only_intra.link = LinkClass::kIntra;
  only_inter.link = LinkClass::kInter;
  EXPECT_TRUE(accepts(any, intra));
  EXPECT_TRUE(accepts(any, inter));
  EXPECT_TRUE(accepts(only_intra, intra));
  EXPECT_FALSE(accepts(only_intra, inter));
  EXPECT_TRUE(accepts(only_inter, inter));
  EXPECT_FALSE(accepts(only_inter, intra));
}

TEST(PolicyMatch, EmptyRangesAreRefused) {
  PolicyRule bytes = rule_for("fp16");
  bytes.match.min_bytes = 10;
  bytes.match.max_bytes = 9;
  Policy policy;
  EXPECT_EQ(policy.add_rule(bytes), ncclInvalidArgument);
  EXPECT_NE(error_text().find("min_bytes 10 exceeds max_bytes 9"), std::string::npos);
  PolicyRule ranks = rule_for("fp16");
  ranks.match.min_comm_size = 0;
  EXPECT_EQ(policy.add_rule(ranks), ncclInvalidArgument);
  EXPECT_TRUE(policy.rules().empty());
}

// ---------------------------------------------------------------------------------------------
// Schedules

TEST(PolicySchedule, StartEndAndEvery) {
  PolicyRule rule = rule_for("fp16");
  rule.schedule = Schedule{5, 15, 3, 0};
  Policy policy = policy_of({rule});
  std::vector<uint64_t> active;
  for (uint64_t step = 0; step < 30; ++step) {
    TensorInfo info = tensor();
    info.step = step;
    Decision decision = policy.decide(info);
    EXPECT_EQ(decision.rule, 0);  // the rule matches every step; its schedule decides
    if (decision.compressed()) {
      EXPECT_TRUE(decision.scheduled);
      active.push_back(step);
    } else {
      EXPECT_FALSE(decision.scheduled);
      EXPECT_EQ(decision.memory, MemoryKind::kNone);
    }
  }
  EXPECT_EQ(active, (std::vector<uint64_t>{5, 8, 11, 14}));  // end is exclusive
}

TEST(PolicySchedule, EndZeroMeansForever) {
  Schedule schedule{10, 0, 1, 0};
  EXPECT_FALSE(schedule.active(9));
  EXPECT_TRUE(schedule.active(10));
  EXPECT_TRUE(schedule.active(uint64_t(1) << 60));
}

TEST(PolicySchedule, AnInactiveFirstMatchDoesNotFallThrough) {
  PolicyRule late = rule_for("fp16");
  late.schedule.start = 100;
  Policy policy = policy_of({late, rule_for("bf16")});
  Decision decision = policy.decide(tensor());
  EXPECT_EQ(decision.rule, 0);
  EXPECT_FALSE(decision.compressed());
}

TEST(PolicySchedule, WarmupProgressRampsOverTheFirstActiveSteps) {
  PolicyRule rule = rule_for("fp16");
  rule.schedule = Schedule{10, 0, 1, 4};
  Policy policy = policy_of({rule});
  const double expected[] = {0.25, 0.5, 0.75, 1.0, 1.0, 1.0};
  for (uint64_t i = 0; i < 6; ++i) {
    TensorInfo info = tensor();
    info.step = 10 + i;
    EXPECT_DOUBLE_EQ(policy.decide(info).warmup_progress, expected[i]) << "step " << info.step;
  }
}

TEST(PolicySchedule, WarmupCountsActiveStepsWhenSkipping) {
  Schedule schedule{10, 0, 2, 2};
  EXPECT_DOUBLE_EQ(schedule.warmup_progress(10), 0.5);
  EXPECT_DOUBLE_EQ(schedule.warmup_progress(12), 1.0);
  EXPECT_DOUBLE_EQ(schedule.warmup_progress(14), 1.0);
  Schedule none{0, 0, 1, 0};
  EXPECT_DOUBLE_EQ(none.warmup_progress(0), 1.0);
  Schedule from_zero{0, 0, 1, 3};
  EXPECT_DOUBLE_EQ(from_zero.warmup_progress(0), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(from_zero.warmup_progress(2), 1.0);
}

TEST(PolicySchedule, NeverActiveSchedulesAreRefused) {
  EXPECT_EQ((Schedule{0, 0, 0, 0}.validate()), ncclInvalidArgument);
  EXPECT_NE(error_text().find("every must be at least 1"), std::string::npos);
  EXPECT_EQ((Schedule{10, 10, 1, 0}.validate()), ncclInvalidArgument);
  EXPECT_NE(error_text().find("end 10 is not after start 10"), std::string::npos);
  EXPECT_EQ((Schedule{10, 11, 1, 0}.validate()), ncclSuccess);
}

// ---------------------------------------------------------------------------------------------
// Codec choices

TEST(PolicyCodec, UnknownCodecsAndParametersAreRefused) {
  CodecChoice choice;
  EXPECT_EQ(CodecChoice::make("int9", CodecParams("int9"), std::nullopt, &choice),
            ncclInvalidArgument);
  EXPECT_NE(error_text().find("unknown codec 'int9' (known: none, fp16, bf16"), std::string::npos)
      << error_text();
  CodecParams params("fp16");
  params.set("block", "64");
  EXPECT_EQ(CodecChoice::make("fp16", params, std::nullopt, &choice), ncclInvalidArgument);
  EXPECT_NE(error_text().find("unknown parameter 'block'"), std::string::npos) << error_text();
}

TEST(PolicyCodec, MemoryDefaultsFollowTheCodec) {
  const auto memory_of = [](const char* spec) {
    std::unique_ptr<Codec> codec;
    EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec;
    return default_memory_kind(*codec);
  };
  EXPECT_EQ(memory_of("none"), MemoryKind::kNone);
  EXPECT_EQ(memory_of("fp16"), MemoryKind::kNone);
  EXPECT_EQ(memory_of("bf16"), MemoryKind::kNone);
  EXPECT_EQ(memory_of("int8"), MemoryKind::kResidual);
  EXPECT_EQ(memory_of("topk"), MemoryKind::kResidual);
  EXPECT_EQ(memory_of("powersgd"), MemoryKind::kResidual);
  EXPECT_EQ(memory_of("dgc"), MemoryKind::kMomentum);
  // Block-scaled formats: contractions (saturation and rounding only shrink), so residual.
  EXPECT_EQ(memory_of("mxfp8"), MemoryKind::kResidual);
  EXPECT_EQ(memory_of("mxfp8:elem=e5m2,rounding=stochastic"), MemoryKind::kResidual);
  EXPECT_EQ(memory_of("mxfp4"), MemoryKind::kResidual);
  EXPECT_EQ(memory_of("nvfp4:rounding=stochastic"), MemoryKind::kResidual);
  // Unbiased scalings are not contractions: no residual by default, and none allowed.
  EXPECT_EQ(memory_of("terngrad"), MemoryKind::kNone);
  EXPECT_EQ(memory_of("randomk"), MemoryKind::kNone);
  EXPECT_EQ(memory_of("randomk:unbiased=false"), MemoryKind::kResidual);
  for (const char* name : {"terngrad", "randomk"}) {
    CodecChoice refused;
    EXPECT_EQ(CodecChoice::make(name, CodecParams(name), MemoryKind::kResidual, &refused),
              ncclInvalidArgument);
    EXPECT_NE(error_text().find("grows every step"), std::string::npos) << error_text();
  }
  CodecChoice choice;
  ASSERT_EQ(CodecChoice::make("bf16", CodecParams("bf16"), std::nullopt, &choice), ncclSuccess);
  EXPECT_EQ(choice.memory, MemoryKind::kNone);
  ASSERT_EQ(CodecChoice::make("bf16", CodecParams("bf16"), MemoryKind::kResidual, &choice),
            ncclSuccess);
  EXPECT_EQ(choice.memory, MemoryKind::kResidual);
}

TEST(PolicyCodec, MemoryThatDoesNotFitTheCodecIsRefused) {
  CodecChoice choice;
  EXPECT_EQ(CodecChoice::make("fp16", CodecParams("fp16"), MemoryKind::kMomentum, &choice),
            ncclInvalidArgument);
  EXPECT_NE(error_text().find("momentum"), std::string::npos) << error_text();
  EXPECT_EQ(CodecChoice::make("none", CodecParams("none"), MemoryKind::kResidual, &choice),
            ncclInvalidArgument);
  EXPECT_NE(error_text().find("codec none is lossless"), std::string::npos) << error_text();
}

TEST(PolicyCodec, AutoIsDeferredToTheCostModel) {
  CodecChoice choice;
  ASSERT_EQ(CodecChoice::make("auto", CodecParams("auto"), std::nullopt, &choice), ncclSuccess);
  EXPECT_EQ(choice.spec, "auto");
  EXPECT_EQ(choice.name, "auto");
  EXPECT_EQ(choice.memory, MemoryKind::kResidual);
  CodecParams params("auto");
  params.set("block", "64");
  EXPECT_EQ(CodecChoice::make("auto", params, std::nullopt, &choice), ncclInvalidArgument);
  EXPECT_NE(error_text().find("'auto' takes one parameter, max_rel_err"), std::string::npos)
      << error_text();
  EXPECT_EQ(CodecChoice::make("auto", CodecParams("auto"), MemoryKind::kMomentum, &choice),
            ncclInvalidArgument);
}

TEST(PolicyCodec, AutoTakesTheErrorBoundItMayChooseWithin) {
  CodecChoice choice;
  ASSERT_EQ(CodecChoice::make("auto", CodecParams("auto"), std::nullopt, &choice), ncclSuccess);
  EXPECT_DOUBLE_EQ(choice.max_rel_err, 0.01);
  CodecParams params("auto");
  params.set("max_rel_err", "0.05");
  ASSERT_EQ(CodecChoice::make("auto", params, std::nullopt, &choice), ncclSuccess) << error_text();
  EXPECT_DOUBLE_EQ(choice.max_rel_err, 0.05);
  EXPECT_EQ(choice.spec, "auto:max_rel_err=0.05");
  params.set("max_rel_err", "-1");
  EXPECT_EQ(CodecChoice::make("auto", params, std::nullopt, &choice), ncclInvalidArgument);
  EXPECT_NE(error_text().find("max_rel_err"), std::string::npos) << error_text();

  // The shorthand and a file rule both carry it to the decision.
  Policy policy;
  ASSERT_EQ(Policy::from_codec_spec("auto:max_rel_err=0.2", &policy), ncclSuccess) << error_text();
  TensorInfo info;
  info.dtype = DType::kFloat32;
  info.bytes = 1 << 20;
  info.comm_size = 4;
  EXPECT_DOUBLE_EQ(policy.decide(info).max_rel_err, 0.2);
  ASSERT_EQ(Policy::from_yaml("rules:\n  - codec: auto\n    max_rel_err: 0.03\n", "t", &policy),
            ncclSuccess)
      << error_text();
  EXPECT_DOUBLE_EQ(policy.decide(info).max_rel_err, 0.03);
  EXPECT_EQ(Policy::from_yaml("rules:\n  - codec: int8\n    max_rel_err: 0.03\n", "t", &policy),
            ncclInvalidArgument);
  EXPECT_NE(error_text().find("t:3: rule 1: max_rel_err: only codec auto"), std::string::npos)
      << error_text();
}

TEST(PolicyCodec, LossyCodecsDefaultToResidualMemory) {
  CodecParams params("int8");
  params.set("block", "128");
  CodecChoice choice;
  ASSERT_EQ(CodecChoice::make("int8", params, std::nullopt, &choice), ncclSuccess) << error_text();
  EXPECT_EQ(choice.memory, MemoryKind::kResidual);
  EXPECT_NE(choice.spec.find("block=128"), std::string::npos) << choice.spec;
  EXPECT_TRUE(choice.params.has("block"));
}

TEST(PolicyCodec, DgcDefaultsToMomentum) {
  CodecChoice choice;
  ASSERT_EQ(CodecChoice::make("dgc", CodecParams("dgc"), std::nullopt, &choice), ncclSuccess)
      << error_text();
  EXPECT_EQ(choice.memory, MemoryKind::kMomentum);
}

TEST(PolicyCodec, AFallbackMustNeedNoMemory) {
  // Unbiased or a cast: what they drop averages out without error feedback.
  for (const char* spec : {"none", "fp16", "bf16", "qsgd", "qsgd:levels=15", "terngrad",
                           "randomk:ratio=0.1", "int8:rounding=stochastic"}) {
    std::string name;
    CodecParams params;
    ASSERT_EQ(parse_codec_spec(spec, &name, &params), ncclSuccess) << spec;
    CodecChoice choice;
    EXPECT_EQ(CodecChoice::make_fallback(name, params, &choice), ncclSuccess)
        << spec << ": " << error_text();
    EXPECT_EQ(choice.memory, MemoryKind::kNone) << spec;
  }
  // Biased without error feedback, or keeping state that needs memory.
  for (const char* spec :
       {"sign", "int8", "int4:rounding=nearest", "topk", "threshold", "terngrad:clip=2.5",
        "randomk:unbiased=false", "dgc", "powersgd", "auto"}) {
    std::string name;
    CodecParams params;
    ASSERT_EQ(parse_codec_spec(spec, &name, &params), ncclSuccess) << spec;
    CodecChoice choice;
    EXPECT_EQ(CodecChoice::make_fallback(name, params, &choice), ncclInvalidArgument) << spec;
    EXPECT_NE(error_text().find("fallback"), std::string::npos) << error_text();
  }
}

TEST(PolicyCodec, AHandBuiltRuleWithABiasedFallbackIsRefused) {
  PolicyRule rule = rule_for("sign");
  rule.fallback.name = "topk";
  rule.fallback.spec = "topk";
  Policy policy;
  EXPECT_EQ(policy.add_rule(std::move(rule)), ncclInvalidArgument);
  EXPECT_NE(error_text().find("is biased"), std::string::npos) << error_text();
  EXPECT_TRUE(policy.rules().empty());
}

TEST(PolicyCodec, DecisionCarriesTheRulesFallback) {
  Policy policy;
  ASSERT_EQ(Policy::from_yaml("rules:\n"
                              "  - match: {name: \"a.*\"}\n"
                              "    codec: sign\n"
                              "    fallback: \"qsgd:levels=15\"\n"
                              "  - codec: sign\n",
                              "test", &policy),
            ncclSuccess)
      << error_text();
  Decision with = policy.decide(tensor("a.w"));
  EXPECT_EQ(with.fallback.name, "qsgd");
  EXPECT_EQ(with.fallback.spec, "qsgd:block=256,levels=15,norm=max");
  EXPECT_EQ(with.fallback.memory, MemoryKind::kNone);
  Decision without = policy.decide(tensor("b.w"));
  EXPECT_EQ(without.codec, "sign");
  EXPECT_EQ(without.fallback.spec, "none");
}

// A rule's ps_receive (the parameter server's receives, terse.h) reaches the decision canonical,
// whatever the rule's codec and schedule; tensors of rules without one receive exactly.
TEST(PolicyCodec, DecisionCarriesTheRulesParameterServerReceiveCodec) {
  Policy policy;
  ASSERT_EQ(Policy::from_yaml("rules:\n"
                              "  - match: {name: \"a.*\"}\n"
                              "    codec: none\n"
                              "    ps_receive: \"int8:block=64\"\n"
                              "  - codec: sign\n"
                              "    schedule: {start: 5}\n"
                              "    ps_receive: bf16\n"
                              "  - codec: fp16\n",
                              "test", &policy),
            ncclSuccess)
      << error_text();
  EXPECT_EQ(policy.decide(tensor("a.w")).ps_receive, "int8:block=64,mode=minmax,rounding=nearest");
  EXPECT_EQ(policy.decide(tensor("b.w")).ps_receive, "bf16");  // step 0: before the schedule
  Policy plain;
  ASSERT_EQ(Policy::from_codec_spec("int8", &plain), ncclSuccess) << error_text();
  EXPECT_EQ(plain.decide(tensor("a.w")).ps_receive, "none");
}

// ---------------------------------------------------------------------------------------------
// The environment

// The policy as the communicator reads it (agreed_settings.h), with the other settings unset;
// `*policy` is replaced only on success.
ncclResult_t load_policy_from_env(Policy* policy) {
  CommSettings settings;
  std::vector<AgreedSetting> compared;
  TERSE_CHECK(read_comm_settings(&settings, &compared));
  *policy = settings.compression.policy;
  return ncclSuccess;
}

class PolicyEnvironment : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    unsetenv("TERSE_CODEC");
    unsetenv("TERSE_POLICY");
  }
};

TEST_F(PolicyEnvironment, NeitherVariableGivesTheEmptyPolicy) {
  Policy policy = policy_of({rule_for("fp16")});
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  EXPECT_TRUE(policy.rules().empty());
}

TEST_F(PolicyEnvironment, CodecShorthandIsOneRuleForEveryFloatSum) {
  setenv("TERSE_CODEC", "bf16", 1);
  Policy policy;
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  ASSERT_EQ(policy.rules().size(), 1u);
  EXPECT_EQ(policy.rules()[0].origin, "TERSE_CODEC");
  TensorInfo info = tensor("", 4);
  info.link = LinkClass::kIntra;
  info.comm_size = 1;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    info.dtype = dtype;
    EXPECT_EQ(policy.decide(info).codec, "bf16");
  }
  info.op = ncclAvg;
  EXPECT_EQ(policy.decide(info).codec, "bf16");
  info.op = ncclMax;
  EXPECT_FALSE(policy.decide(info).compressed());
  info.op = ncclSum;
  info.dtype.reset();
  EXPECT_FALSE(policy.decide(info).compressed());
}

TEST_F(PolicyEnvironment, CodecShorthandAcceptsParametersAndAuto) {
  setenv("TERSE_CODEC", "auto", 1);
  Policy policy;
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  EXPECT_EQ(policy.decide(tensor()).codec, "auto");
  setenv("TERSE_CODEC", "int8:block=64", 1);
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  Decision decision = policy.decide(tensor());
  EXPECT_EQ(decision.codec, "int8");
  EXPECT_EQ(decision.memory, MemoryKind::kResidual);
  EXPECT_NE(decision.spec.find("block=64"), std::string::npos) << decision.spec;
}

TEST_F(PolicyEnvironment, CodecShorthandNamesAFallbackAfterASemicolon) {
  setenv("TERSE_CODEC", "sign;fallback=qsgd:levels=15,block=128", 1);
  Policy policy;
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  Decision decision = policy.decide(tensor());
  EXPECT_EQ(decision.codec, "sign");
  EXPECT_EQ(decision.memory, MemoryKind::kResidual);
  EXPECT_EQ(decision.fallback.spec, "qsgd:block=128,levels=15,norm=max");
  setenv("TERSE_CODEC", "sign;fallback=topk", 1);
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("TERSE_CODEC=sign;fallback=topk: fallback 'topk"), std::string::npos)
      << error_text();
  setenv("TERSE_CODEC", "sign;backup=qsgd", 1);
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("after ';' expected fallback=<codec spec>"), std::string::npos)
      << error_text();
}

TEST_F(PolicyEnvironment, BadCodecIsRefusedNamingTheVariable) {
  setenv("TERSE_CODEC", "int9", 1);
  Policy policy = policy_of({rule_for("fp16")});
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("TERSE_CODEC=int9: unknown codec 'int9' (known: none, fp16, bf16"),
            std::string::npos)
      << error_text();
  EXPECT_EQ(policy.rules().size(), 1u);  // left as it was
}

TEST_F(PolicyEnvironment, BadParameterIsRefusedNamingTheVariable) {
  setenv("TERSE_CODEC", "fp16:level=3", 1);
  Policy policy;
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("TERSE_CODEC=fp16:level=3: "), std::string::npos) << error_text();
  EXPECT_NE(error_text().find("unknown parameter 'level'"), std::string::npos) << error_text();
  setenv("TERSE_CODEC", "fp16:level", 1);
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("not key=value"), std::string::npos) << error_text();
  setenv("TERSE_CODEC", ":x=1", 1);
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("names no codec"), std::string::npos) << error_text();
}

TEST_F(PolicyEnvironment, BothVariablesSetIsRefused) {
  setenv("TERSE_CODEC", "fp16", 1);
  setenv("TERSE_POLICY", "/nonexistent/policy.yaml", 1);
  Policy policy;
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("TERSE_CODEC=fp16 and TERSE_POLICY=/nonexistent/policy.yaml are "
                              "both set"),
            std::string::npos)
      << error_text();
}

// ---------------------------------------------------------------------------------------------
// YAML files

// A file under the test temp directory holding `text`, removed when the object goes.
class TempPolicyFile {
 public:
  TempPolicyFile(const std::string& name, const std::string& text)
      : path_(::testing::TempDir() + "terse_policy_" + name + ".yaml") {
    std::ofstream(path_) << text;
  }
  ~TempPolicyFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// perf/policies/example.yaml: found from this file's path (absolute in CMake builds), else by
// walking up from the working directory.
std::string example_policy_path() {
  const std::string relative = "perf/policies/example.yaml";
  std::string root = __FILE__;  // <root>/tests/compressed/test_policy.cpp
  for (int i = 0; i < 3; ++i) root = root.substr(0, root.find_last_of('/'));
  std::vector<std::string> candidates = {root + "/" + relative};
  std::string up = "";
  for (int i = 0; i < 6; ++i, up += "../") candidates.push_back(up + relative);
  for (const std::string& candidate : candidates) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  return candidates.front();
}

// fp8 tensors (issue 14) are matched by dtype like the others, and routed to the block-scaled
// codecs by name.
TEST_F(PolicyEnvironment, Fp8DtypesAndBlockScaledCodecs) {
  const TempPolicyFile file("fp8",
                            "rules:\n"
                            "  - match: {dtype: [float8e4m3, e5m2]}\n"
                            "    codec: mxfp8:elem=e5m2\n"
                            "  - codec: nvfp4\n");
  const std::string& path = file.path();
  setenv("TERSE_POLICY", path.c_str(), 1);
  Policy policy;
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  TensorInfo fp8 = tensor("w", 1 << 20);
  fp8.dtype = DType::kFloat8E4M3;
  EXPECT_EQ(policy.decide(fp8).rule, 0);
  EXPECT_EQ(policy.decide(fp8).codec, "mxfp8");
  EXPECT_EQ(policy.decide(fp8).memory, MemoryKind::kResidual);
  fp8.dtype = DType::kFloat8E5M2;
  EXPECT_EQ(policy.decide(fp8).rule, 0);
  fp8.dtype = DType::kBFloat16;
  EXPECT_EQ(policy.decide(fp8).codec, "nvfp4");
}

TEST_F(PolicyEnvironment, GoodFileLoadsAndDecides) {
  const TempPolicyFile file("good",
                            "# comment\n"
                            "rules:\n"
                            "  - match: {max_bytes: 64K}\n"
                            "    codec: none\n"
                            "  - match:\n"
                            "      name: \"encoder\\\\..*\"\n"
                            "      min_bytes: 1M\n"
                            "      dtype: [float, bf16]\n"
                            "      op: avg\n"
                            "      comm_size: {min: 2, max: 64}\n"
                            "      link: inter\n"
                            "    codec: fp16\n"
                            "    memory: residual\n"
                            "    schedule: {start: 10, end: 20, every: 2, warmup: 2}\n"
                            "  - match: {link: intra}\n"
                            "    codec: bf16\n"
                            "  - codec: auto\n"
                            "    memory: none\n");
  const std::string& path = file.path();
  setenv("TERSE_POLICY", path.c_str(), 1);
  Policy policy;
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  ASSERT_EQ(policy.rules().size(), 4u);
  EXPECT_EQ(policy.rules()[1].origin, path + ":5");

  EXPECT_EQ(policy.decide(tensor("encoder.w", 64 << 10)).rule, 0);  // 64K inclusive
  EXPECT_FALSE(policy.decide(tensor("encoder.w", 64 << 10)).compressed());

  TensorInfo encoder = tensor("encoder.w", 2 << 20);
  encoder.op = ncclAvg;
  encoder.step = 10;
  Decision decision = policy.decide(encoder);
  EXPECT_EQ(decision.rule, 1);
  EXPECT_EQ(decision.codec, "fp16");
  EXPECT_EQ(decision.memory, MemoryKind::kResidual);
  EXPECT_DOUBLE_EQ(decision.warmup_progress, 0.5);
  encoder.step = 12;
  EXPECT_DOUBLE_EQ(policy.decide(encoder).warmup_progress, 1.0);
  encoder.step = 11;  // not an active step: first match wins, so "none"
  EXPECT_EQ(policy.decide(encoder).rule, 1);
  EXPECT_FALSE(policy.decide(encoder).compressed());

  TensorInfo summed = tensor("encoder.w", 2 << 20);  // op sum: rule 1 wants avg
  EXPECT_EQ(policy.decide(summed).rule, 3);
  EXPECT_EQ(policy.decide(summed).codec, "auto");
  EXPECT_EQ(policy.decide(summed).memory, MemoryKind::kNone);
  summed.link = LinkClass::kIntra;
  EXPECT_EQ(policy.decide(summed).codec, "bf16");
}

TEST_F(PolicyEnvironment, CodecParametersMayBeWrittenInTheSpecOrAsAMap) {
  Policy policy;
  ASSERT_EQ(Policy::from_yaml("rules:\n"
                              "  - codec: \"int8:block=64\"\n"
                              "  - codec: int8\n"
                              "    params: {block: 64}\n",
                              "inline.yaml", &policy),
            ncclSuccess)
      << error_text();
  EXPECT_EQ(policy.rules()[0].codec.spec, policy.rules()[1].codec.spec);
  EXPECT_EQ(Policy::from_yaml("rules:\n"
                              "  - codec: \"int8:block=64\"\n"
                              "    params: {block: 32}\n",
                              "inline.yaml", &policy),
            ncclInvalidArgument);
  EXPECT_NE(error_text().find("inline.yaml:3: rule 1: params: 'block' given twice"),
            std::string::npos)
      << error_text();
}

TEST_F(PolicyEnvironment, TheExamplePolicyLoads) {
  const std::string path = example_policy_path();
  setenv("TERSE_POLICY", path.c_str(), 1);
  Policy policy;
  ASSERT_EQ(load_policy_from_env(&policy), ncclSuccess) << error_text();
  ASSERT_EQ(policy.rules().size(), 4u);
  EXPECT_FALSE(policy.decide(tensor("encoder.layer0.weight", 1024)).compressed());
  TensorInfo encoder = tensor("encoder.layer0.weight", 4 << 20);
  encoder.step = 100;
  Decision decision = policy.decide(encoder);
  EXPECT_EQ(decision.rule, 1);
  EXPECT_EQ(decision.codec, "int8");
  EXPECT_EQ(decision.memory, MemoryKind::kResidual);
  EXPECT_DOUBLE_EQ(decision.warmup_progress, 1.0 / 50.0);
  EXPECT_TRUE(decision.params.has("rounding"));
  encoder.step = 99;
  EXPECT_FALSE(policy.decide(encoder).compressed());
  TensorInfo intra = tensor("x", 4 << 20);
  intra.link = LinkClass::kIntra;
  EXPECT_EQ(policy.decide(intra).codec, "bf16");
  EXPECT_EQ(policy.decide(tensor("x", 4 << 20)).codec, "auto");
}

TEST_F(PolicyEnvironment, MissingFileIsRefused) {
  setenv("TERSE_POLICY", "/nonexistent/dir/policy.yaml", 1);
  Policy policy;
  EXPECT_EQ(load_policy_from_env(&policy), ncclInvalidArgument);
  EXPECT_NE(error_text().find("TERSE_POLICY=/nonexistent/dir/policy.yaml cannot be read"),
            std::string::npos)
      << error_text();
}

struct BadFile {
  const char* name;
  const char* yaml;
  // What last_error() must contain after "<path>:": "<line>: [rule <n>: ]<reason>".
  const char* expected;
};

class PolicyBadFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(PolicyBadFile, IsRefusedWithFileLineAndReason) {
  const BadFile& bad = GetParam();
  const TempPolicyFile file(bad.name, bad.yaml);
  const std::string& path = file.path();
  Policy policy = policy_of({rule_for("fp16")});
  EXPECT_EQ(Policy::from_file(path, &policy), ncclInvalidArgument);
  const std::string expected = path + ":" + bad.expected;
  EXPECT_NE(error_text().find(expected), std::string::npos)
      << "expected: " << expected << "\n     got: " << error_text();
  EXPECT_EQ(policy.rules().size(), 1u);  // a failed load leaves the policy alone
}

const BadFile kBadFiles[] = {
    {"empty", "", "1: the policy is empty"},
    {"comment_only", "# nothing\n", "1: the policy is empty"},
    {"syntax", "rules:\n  - codec: fp16\n    match: {name: [x\n", "4: not valid YAML"},
    {"top_level_list", "- codec: fp16\n", "1: expected a map with a 'rules' list"},
    {"unknown_top_key", "rules: []\nrule: []\n", "2: unknown key 'rule' in the top level"},
    {"no_rules", "{}\n", "1: no 'rules' list"},
    {"rules_not_list", "rules: fp16\n", "1: 'rules' must be a list"},
    {"rule_not_map", "rules:\n  - fp16\n", "2: rule 1: expected a map with 'codec'"},
    {"bad_ps_receive", "rules:\n  - codec: fp16\n    ps_receive: bogus\n", "3: rule 1: "},
    {"unknown_rule_key", "rules:\n  - codec: fp16\n    memroy: none\n",
     "3: rule 1: unknown key 'memroy' in rule (known: match, codec, params, memory, schedule, "
     "fallback, max_rel_err, ps_receive)"},
    {"missing_codec", "rules:\n  - match: {max_bytes: 1K}\n", "2: rule 1: no 'codec'"},
    {"unknown_codec", "rules:\n  - codec: fp16\n  - match: {link: inter}\n    codec: int9\n",
     "4: rule 2: unknown codec 'int9' (known: none, fp16, bf16"},
    {"bad_param", "rules:\n  - codec: fp16\n    params: {level: 3}\n",
     "3: rule 1: codec fp16: unknown parameter 'level'"},
    {"bad_param_in_spec", "rules:\n  - codec: \"fp16:level=3\"\n",
     "2: rule 1: codec fp16: unknown parameter 'level'"},
    {"params_not_map", "rules:\n  - codec: fp16\n    params: [1, 2]\n",
     "3: rule 1: params: expected a map"},
    {"bad_regex", "rules:\n  - match:\n      name: \"enc(oder\"\n    codec: fp16\n",
     "3: rule 1: name 'enc(oder' is not a valid regular expression"},
    {"bad_bytes", "rules:\n  - match: {min_bytes: 1MB}\n    codec: fp16\n",
     "2: rule 1: min_bytes: '1MB' is not a byte count"},
    {"negative_bytes", "rules:\n  - match:\n      max_bytes: -4\n    codec: fp16\n",
     "3: rule 1: max_bytes: '-4' is not a byte count"},
    {"empty_byte_range",
     "rules:\n  - match:\n      min_bytes: 2M\n      max_bytes: 1M\n"
     "    codec: fp16\n",
     "3: rule 1: min_bytes 2097152 exceeds max_bytes 1048576"},
    {"bad_dtype", "rules:\n  - match:\n      dtype: [float, int32]\n    codec: fp16\n",
     "3: rule 1: dtype: 'int32' is not a float type"},
    {"empty_dtype", "rules:\n  - match: {dtype: []}\n    codec: fp16\n",
     "2: rule 1: dtype: the list is empty"},
    {"max_op", "rules:\n  - match:\n      op:\n        - sum\n        - max\n    codec: fp16\n",
     "5: rule 1: op 'max' cannot be compressed"},
    {"unknown_op", "rules:\n  - match: {op: mean}\n    codec: fp16\n",
     "2: rule 1: op: 'mean' is not a reduction"},
    {"comm_size_key",
     "rules:\n  - match:\n      comm_size: {min: 2, maximum: 8}\n"
     "    codec: fp16\n",
     "3: rule 1: unknown key 'maximum' in comm_size (known: min, max)"},
    {"comm_size_scalar", "rules:\n  - match: {comm_size: 8}\n    codec: fp16\n",
     "2: rule 1: comm_size: expected a map"},
    {"comm_size_empty", "rules:\n  - match:\n      comm_size: {min: 9, max: 8}\n    codec: fp16\n",
     "3: rule 1: comm_size {min: 9, max: 8} is empty"},
    {"bad_link", "rules:\n  - match: {link: cross}\n    codec: fp16\n",
     "2: rule 1: link: 'cross' is not one of any, intra, inter"},
    {"unknown_match_key", "rules:\n  - match:\n      names: w\n    codec: fp16\n",
     "3: rule 1: unknown key 'names' in match"},
    {"repeated_key", "rules:\n  - match:\n      link: inter\n      link: intra\n    codec: fp16\n",
     "4: rule 1: key 'link' given twice in match"},
    {"bad_memory", "rules:\n  - codec: fp16\n    memory: lots\n",
     "3: rule 1: memory: 'lots' is not one of none, residual, momentum"},
    {"momentum_without_dgc", "rules:\n  - codec: fp16\n    memory: momentum\n",
     "3: rule 1: memory 'momentum' is DGC's momentum correction"},
    {"residual_with_none", "rules:\n  - codec: none\n    memory: residual\n",
     "3: rule 1: memory 'residual' with codec 'none' would keep nothing"},
    {"auto_with_params", "rules:\n  - codec: auto\n    params: {block: 64}\n",
     "3: rule 1: codec 'auto' takes one parameter, max_rel_err"},
    {"every_zero", "rules:\n  - codec: fp16\n    schedule: {start: 0, every: 0}\n",
     "3: rule 1: schedule: every must be at least 1"},
    {"end_before_start", "rules:\n  - codec: fp16\n    schedule:\n      start: 50\n      end: 10\n",
     "4: rule 1: schedule: end 10 is not after start 50"},
    {"negative_step", "rules:\n  - codec: fp16\n    schedule: {start: -5}\n",
     "3: rule 1: schedule start: '-5' is not a whole number"},
    {"fractional_step", "rules:\n  - codec: fp16\n    schedule: {warmup: 2.5}\n",
     "3: rule 1: schedule warmup: '2.5' is not a whole number"},
    {"unknown_schedule_key", "rules:\n  - codec: fp16\n    schedule: {start: 1, stop: 9}\n",
     "3: rule 1: unknown key 'stop' in schedule (known: start, end, every, warmup)"},
    {"third_rule", "rules:\n  - codec: fp16\n  - codec: bf16\n  - codec: none\n    memory: x\n",
     "5: rule 3: memory: 'x' is not one of"},
    {"biased_fallback", "rules:\n  - codec: sign\n    fallback: topk\n",
     "3: rule 1: fallback 'topk:ratio=0.01,method=sampled' is biased"},
    {"stateful_fallback", "rules:\n  - codec: sign\n    fallback: powersgd\n",
     "3: rule 1: fallback 'powersgd:rank=4,iterations=1,warm_start=true' keeps per-tensor state"},
    {"auto_fallback", "rules:\n  - codec: sign\n    fallback: auto\n",
     "3: rule 1: fallback 'auto': a fallback must be a fixed codec"},
    {"bad_fallback_param", "rules:\n  - codec: sign\n    fallback: \"qsgd:levels=500\"\n",
     "3: rule 1: codec qsgd: parameter levels=500 is outside [1, 127]"},
    {"fallback_list", "rules:\n  - codec: sign\n    fallback: [qsgd]\n",
     "3: rule 1: fallback: expected a single value"},
};

INSTANTIATE_TEST_SUITE_P(Refusals, PolicyBadFile, ::testing::ValuesIn(kBadFiles),
                         [](const ::testing::TestParamInfo<BadFile>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace terse
