// The planner learning from what its calls measured (planner.h, Learning), over given figures:
// a "true" world is a planner on the figures the machine really has, whose predictions stand in
// for measured times; the planner under test starts from nominal figures, sees only those times,
// and must come to the true world's figures and choices. Its agreements are its own (no
// transport: one rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/compressed/planner.h"
#include "compressed/planner_test_support.h"

namespace terse {
namespace {

constexpr double kGbit = 1e9 / 8;

// The candidate of `plan` that runs `codec` with `algorithm`, or null.
const PlanCandidate* find(const CallPlan& plan, const std::string& codec,
                          const std::string& algorithm) {
  for (const PlanCandidate& c : plan.candidates) {
    if (c.codec == codec && c.algorithm == algorithm) return &c;
  }
  return nullptr;
}

struct Worlds {
  Codecs codecs;
  std::unique_ptr<Planner> truth;    // the machine as it is (never learns)
  std::unique_ptr<Planner> learner;  // what terse assumes at first
};

// 4 nodes of one rank: between nodes the learner assumes `nominal`, the machine has `actual`.
void make_worlds(double nominal, double actual, Worlds* worlds) {
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  Planner::Settings fixed = settings;
  fixed.learn = false;
  const std::map<std::string, CodecSpeed> speeds = realistic_speeds(worlds->codecs);
  worlds->truth = Planner::for_figures(0, hosts(4, 1), links(2e-6, 4e9, 50e-6, actual), fixed,
                                       worlds->codecs.maker(), speeds, 5e9);
  worlds->learner = Planner::for_figures(0, hosts(4, 1), links(2e-6, 4e9, 50e-6, nominal), settings,
                                         worlds->codecs.maker(), speeds, 5e9);
}

// One call of `request` on the learner, measured as the true world predicts what it ran.
CallPlan run_call(Worlds& worlds, const PlanRequest& request) {
  EXPECT_EQ(worlds.learner->begin_call(), ncclSuccess);
  CallPlan plan;
  EXPECT_EQ(worlds.learner->plan(request, &plan), ncclSuccess);
  PlanRequest question = request;
  question.may_agree = false;
  CallPlan truth;
  EXPECT_EQ(worlds.truth->plan(question, &truth), ncclSuccess);
  const PlanCandidate* ran = find(truth, chosen(plan).codec, chosen(plan).algorithm);
  EXPECT_NE(ran, nullptr) << chosen(plan).codec << " " << chosen(plan).algorithm;
  if (ran != nullptr) {
    // The codecs run at the speeds both worlds know: only the link is to be learned, so the
    // call reports no codec seconds (nothing to learn there).
    worlds.learner->observe(request, plan, Planner::Measured{ran->prediction.seconds, 0, 0});
  }
  return plan;
}

// `auto` within max_rel_err 0.01 on `count` fp32 elements.
PlanRequest auto_request(size_t count) {
  PlanRequest request;
  request.count = count;
  request.max_rel_err = 0.01;
  return request;
}

TEST(PlannerLearning, AutoFindsTheLinkSlowerThanItsNominalSpeedAndChoosesAsTheTrueWorldDoes) {
  // The case: a 10 Gbit/s NIC whose TCP delivers 4 Gbit/s. On nominal figures auto keeps
  // 64 MiB uncompressed; the machine as it is would compress it.
  Worlds worlds;
  make_worlds(10 * kGbit, 4 * kGbit, &worlds);
  PlanRequest request = auto_request(16 << 20);
  request.error_feedback = true;
  PlanRequest question = request;
  question.may_agree = false;
  CallPlan nominal, truth;
  ASSERT_EQ(worlds.learner->plan(question, &nominal), ncclSuccess);
  ASSERT_EQ(worlds.truth->plan(question, &truth), ncclSuccess);
  ASSERT_NE(chosen(nominal).codec, chosen(truth).codec)
      << "the worlds must disagree for this test to mean anything: " << nominal.describe();

  CallPlan plan;
  for (int call = 1; call <= 20; ++call) plan = run_call(worlds, request);
  // After the warm-up the best is the true world's, predicted as it takes.
  const PlanCandidate& best = plan.candidates.at(static_cast<size_t>(plan.best));
  EXPECT_EQ(best.codec + " " + best.algorithm, chosen(truth).codec + " " + chosen(truth).algorithm)
      << plan.describe();
  EXPECT_NEAR(best.prediction.seconds / chosen(truth).prediction.seconds, 1.0, 0.1);
  const PlannerEstimates estimates = worlds.learner->estimates();
  EXPECT_TRUE(estimates.learning);
  EXPECT_NEAR(estimates.inter.bytes_per_s / (4 * kGbit), 1.0, 0.05);
  EXPECT_EQ(estimates.inter.nominal_bytes_per_s, 10 * kGbit);
  EXPECT_GE(estimates.plan_changes, 1u);
  EXPECT_GE(estimates.agreements, 4u);
}

TEST(PlannerLearning, AFasterLinkThanAssumedTurnsCompressionOff) {
  // The other way: assumed 1 Gbit/s, the machine has 40; uncompressed wins there.
  Worlds worlds;
  make_worlds(1 * kGbit, 40 * kGbit, &worlds);
  PlanRequest request = auto_request(4 << 20);
  CallPlan plan;
  for (int call = 1; call <= 20; ++call) plan = run_call(worlds, request);
  PlanRequest question = request;
  question.may_agree = false;
  CallPlan truth;
  ASSERT_EQ(worlds.truth->plan(question, &truth), ncclSuccess);
  EXPECT_EQ(chosen(truth).codec, "none");
  EXPECT_EQ(plan.candidates.at(static_cast<size_t>(plan.best)).codec, "none") << plan.describe();
}

TEST(PlannerLearning, CodecSecondsMoveTheCodecsSpeedInProportion) {
  // Two planners see the same call, one measuring twice the other's encode seconds: after one
  // agreement (half-way steps) their encode speeds differ by sqrt(2), whatever the prediction.
  double speeds[2] = {0, 0};
  for (int twice = 0; twice < 2; ++twice) {
    Worlds worlds;
    make_worlds(1 * kGbit, 1 * kGbit, &worlds);
    PlanRequest request;
    request.count = 1 << 20;
    request.codec = worlds.codecs.get("int8");
    ASSERT_EQ(worlds.learner->begin_call(), ncclSuccess);
    CallPlan plan;
    ASSERT_EQ(worlds.learner->plan(request, &plan), ncclSuccess);
    worlds.learner->observe(request, plan, Planner::Measured{0.05, (twice + 1) * 0.01, 0.004});
    ASSERT_EQ(worlds.learner->begin_call(), ncclSuccess);  // call 2: the agreement
    for (const CodecEstimate& codec : worlds.learner->estimates().codecs) {
      if (codec.codec == request.codec->spec()) {
        speeds[twice] = codec.encode_bytes_per_s;
        EXPECT_EQ(codec.observations, 1u);
      }
    }
  }
  ASSERT_GT(speeds[1], 0);
  EXPECT_NEAR(speeds[0] / speeds[1], std::sqrt(2.0), 1e-9);
}

// The contenders of `plan` as planner.h states them: the other candidates predicted within
// kExploreWithin of the best that compress as the best does, fastest first, at most
// kMaxContenders.
std::vector<int> contenders_of(const CallPlan& plan) {
  const PlanCandidate& best = plan.candidates.at(static_cast<size_t>(plan.best));
  std::vector<std::pair<double, int>> found;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const PlanCandidate& c = plan.candidates[i];
    if (static_cast<int>(i) != plan.best && (c.codec == "none") == (best.codec == "none") &&
        c.prediction.seconds <= kExploreWithin * best.prediction.seconds) {
      found.emplace_back(c.prediction.seconds, static_cast<int>(i));
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int> out;
  for (size_t i = 0; i < found.size() && i < kMaxContenders; ++i) out.push_back(found[i].second);
  return out;
}

TEST(PlannerLearning, AutosSecondAndFourthCallsExploreItsContendersAndFixedCodecsNever) {
  // 3 Gbit/s between 4 nodes, 16 MiB: int8, fp16 and bf16 on sra are close.
  Worlds worlds;
  make_worlds(3 * kGbit, 3 * kGbit, &worlds);
  PlanRequest request = auto_request(4 << 20);
  uint64_t explored = 0;
  for (uint64_t call = 1; call <= 2 * kExplorePeriod; ++call) {
    CallPlan plan;
    ASSERT_EQ(worlds.learner->plan(request, &plan), ncclSuccess);
    const std::vector<int> contenders = contenders_of(plan);
    ASSERT_GE(contenders.size(), 2u) << plan.describe();
    int expected = plan.best;
    if (call == 2 || call == 4) expected = contenders[call / 2 - 1];
    if (call % kExplorePeriod == 0) expected = contenders[(call / kExplorePeriod) % 2];
    ASSERT_EQ(plan.chosen, expected) << "call " << call << ": " << plan.describe();
    if (plan.chosen == plan.best) continue;
    ++explored;
    EXPECT_EQ(plan.codec, chosen(plan).codec_object);
    EXPECT_EQ(plan.algorithm, chosen(plan).run);
  }
  EXPECT_EQ(explored, 4u);
  EXPECT_EQ(worlds.learner->estimates().explorations, 4u);

  request.codec = worlds.codecs.get("int8");
  request.max_rel_err = 0;
  for (int call = 1; call <= 6; ++call) {
    CallPlan plan;
    ASSERT_EQ(worlds.learner->plan(request, &plan), ncclSuccess);
    EXPECT_EQ(plan.chosen, plan.best) << call;
  }
}

// A re-plan keeps the previous choice while it is predicted within 10% of the best, and only
// then: over a sweep of true link speeds around the assumed 3 Gbit/s, every final best is either
// the first choice within 10% of the fastest prediction, or the fastest itself.
TEST(PlannerLearning, ARePlanKeepsAChoiceWithinTenPercentOfTheBest) {
  int kept_slower = 0;
  for (double gbit = 2.0; gbit <= 4.5; gbit += 0.125) {
    Worlds worlds;
    make_worlds(3 * kGbit, gbit * kGbit, &worlds);
    PlanRequest request = auto_request(4 << 20);
    CallPlan first, plan;
    first = run_call(worlds, request);
    for (int call = 2; call <= 20; ++call) plan = run_call(worlds, request);
    const PlanCandidate& best = plan.candidates.at(static_cast<size_t>(plan.best));
    double fastest = INFINITY;
    for (const PlanCandidate& c : plan.candidates) {
      fastest = std::min(fastest, c.prediction.seconds);
    }
    const std::string first_choice = chosen(first).codec + " " + chosen(first).algorithm;
    // Uncompressed while compression is not kAutoMinGain faster: auto's own rule.
    const bool gain_rule =
        best.codec == "none" && best.prediction.seconds <= kAutoMinGain * fastest;
    if (best.prediction.seconds > fastest && !gain_rule) {
      EXPECT_EQ(best.codec + " " + best.algorithm, first_choice) << gbit << ": " << plan.describe();
      EXPECT_LE(best.prediction.seconds, kKeepWithin * fastest) << gbit;
      ++kept_slower;
    }
  }
  EXPECT_GT(kept_slower, 0) << "no link speed of the sweep kept a choice that is not the fastest";
}

TEST(PlannerLearning, OffItKeepsTheNominalFiguresAndNeverExplores) {
  Codecs codecs;
  Planner::Settings settings;
  settings.learn = false;
  auto planner = Planner::for_figures(0, hosts(4, 1), links(2e-6, 4e9, 50e-6, 10 * kGbit), settings,
                                      codecs.maker(), realistic_speeds(codecs), 5e9);
  const PlanRequest request = auto_request(16 << 20);
  for (int call = 1; call <= 8; ++call) {
    ASSERT_EQ(planner->begin_call(), ncclSuccess);
    CallPlan plan;
    ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
    EXPECT_EQ(plan.chosen, plan.best);
    planner->observe(request, plan, Planner::Measured{10.0, 1.0, 1.0});
  }
  const PlannerEstimates estimates = planner->estimates();
  EXPECT_FALSE(estimates.learning);
  EXPECT_EQ(estimates.inter.bytes_per_s, 10 * kGbit);
  EXPECT_EQ(estimates.agreements, 0u);
}

}  // namespace
}  // namespace terse
