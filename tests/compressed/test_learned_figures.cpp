// The arithmetic of what the planner learns (collectives/compressed/learned_figures.h): how one
// agreement merges the ranks' observations, how far a factor moves, when agreements come, and
// what a payload holds. Expected values are the closed forms of the header's comment, worked
// here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/compressed/learned_figures.h"

namespace terse {
namespace {

using Link = LearnedFigures;

// Every rank's payload, one after another, as the allgather gives them.
std::vector<double> gathered(const std::vector<const LearnedFigures*>& ranks,
                             const std::vector<std::string>& specs) {
  std::vector<double> all;
  for (const LearnedFigures* rank : ranks) {
    const std::vector<double> mine = rank->payload(specs);
    EXPECT_EQ(mine.size(), LearnedFigures::payload_size(specs.size()));
    all.insert(all.end(), mine.begin(), mine.end());
  }
  return all;
}

TEST(LearnedFigures, StartsAtTheNominalFigures) {
  LearnedFigures figures;
  EXPECT_EQ(figures.bandwidth_factor(Link::kInter), 1.0);
  EXPECT_EQ(figures.latency_factor(Link::kIntra), 1.0);
  EXPECT_EQ(figures.encode_factor("int8"), 1.0);
  EXPECT_EQ(figures.decode_factor("int8"), 1.0);
  EXPECT_EQ(figures.agreements(), 0u);
  // The first agreement comes after one call.
  EXPECT_FALSE(figures.agreement_due(1));
  EXPECT_TRUE(figures.agreement_due(2));
}

TEST(LearnedFigures, ALinkMovesHalfWayToTheMeanOfEveryRanksObservations) {
  LearnedFigures a, b;
  a.observe_bandwidth(Link::kInter, std::log(2.0));
  a.observe_bandwidth(Link::kInter, std::log(4.0));
  b.observe_bandwidth(Link::kInter, std::log(8.0));
  b.observe_latency(Link::kIntra, std::log(0.25));
  const std::vector<std::string> specs;
  const std::vector<double> all = gathered({&a, &b}, specs);
  for (LearnedFigures* rank : {&a, &b}) {
    EXPECT_TRUE(rank->merge(all, 2, specs, 2));
    // Mean of log 2, log 4, log 8 is log 4; half-way from log 1: log 2.
    EXPECT_NEAR(rank->bandwidth_factor(Link::kInter), 2.0, 1e-12);
    EXPECT_NEAR(rank->latency_factor(Link::kIntra), 0.5, 1e-12);
    EXPECT_EQ(rank->bandwidth_factor(Link::kIntra), 1.0);
    EXPECT_EQ(rank->agreements(), 1u);
  }
}

TEST(LearnedFigures, ACodecMovesTowardTheSlowestRanksMean) {
  LearnedFigures a, b, c;
  a.observe_encode("int8", std::log(2.0));
  a.observe_encode("int8", std::log(8.0));  // mean log 4
  b.observe_encode("int8", std::log(9.0));  // the slowest
  c.observe_decode("int8", std::log(3.0));  // c encoded nothing
  const std::vector<std::string> specs = {"bf16", "int8"};
  const std::vector<double> all = gathered({&a, &b, &c}, specs);
  a.merge(all, 3, specs, 2);
  EXPECT_NEAR(a.encode_factor("int8"), 3.0, 1e-12);  // exp(0.5 log 9)
  EXPECT_NEAR(a.decode_factor("int8"), std::sqrt(3.0), 1e-12);
  EXPECT_EQ(a.encode_factor("bf16"), 1.0);
  EXPECT_EQ(a.encode_observations("int8"), 3u);
}

TEST(LearnedFigures, StepsHalveAfterTheWarmUpAgreements) {
  LearnedFigures figures;
  const std::vector<std::string> specs;
  double expected = 0;
  uint64_t call = 1;
  for (int agreement = 0; agreement < 24; ++agreement) {
    figures.observe_bandwidth(Link::kIntra, std::log(16.0));
    while (!figures.agreement_due(call)) ++call;
    figures.merge(figures.payload(specs), 1, specs, call);
    const double step = agreement < LearnedFigures::kWarmupAgreements ? 0.5 : 0.25;
    expected += step * (std::log(16.0) - expected);
    EXPECT_NEAR(std::log(figures.bandwidth_factor(Link::kIntra)), expected, 1e-12) << agreement;
  }
}

TEST(LearnedFigures, AgreementsSpreadOutWhileCallsKeepToTheirPredictions) {
  LearnedFigures figures;
  const std::vector<std::string> specs;
  std::vector<uint64_t> at;
  for (uint64_t call = 1; call <= 200; ++call) {
    if (!figures.agreement_due(call)) continue;
    at.push_back(call);
    figures.observe_call(1.2, 1.0);  // within 1.5x
    figures.merge(figures.payload(specs), 1, specs, call);
  }
  const std::vector<uint64_t> expected = {2, 4, 8, 16, 32, 64, 96, 128, 160, 192};
  EXPECT_EQ(at, expected);
}

TEST(LearnedFigures, ACallOutsideItsMarginBringsTheNextAgreementToTheNextCall) {
  LearnedFigures quiet, departed;
  const std::vector<std::string> specs;
  uint64_t call = 2;
  for (int i = 0; i < 4; ++i) {  // gaps grow to 16
    const std::vector<double> all = gathered({&quiet, &departed}, specs);
    quiet.merge(all, 2, specs, call);
    departed.merge(all, 2, specs, call);
    call *= 2;
  }
  EXPECT_FALSE(quiet.agreement_due(call - 1));
  ASSERT_TRUE(quiet.agreement_due(call));
  departed.observe_call(1.0, 1.6);  // 1.6x faster than predicted: one rank says so
  const std::vector<double> all = gathered({&quiet, &departed}, specs);
  quiet.merge(all, 2, specs, call);
  departed.merge(all, 2, specs, call);
  EXPECT_TRUE(quiet.agreement_due(call + 1));
  EXPECT_TRUE(departed.agreement_due(call + 1));
}

TEST(LearnedFigures, AnOutlierIsClampedAndSmallMovesDoNotMakePlansStale) {
  LearnedFigures figures;
  const std::vector<std::string> specs;
  figures.observe_bandwidth(Link::kInter, std::log(1e9));
  EXPECT_TRUE(figures.merge(figures.payload(specs), 1, specs, 2));
  EXPECT_NEAR(figures.bandwidth_factor(Link::kInter), std::sqrt(LearnedFigures::kClamp), 1e-9);
  // A move of under 5% leaves the plans as they are.
  figures.observe_bandwidth(Link::kInter, std::log(figures.bandwidth_factor(Link::kInter)) + 0.08);
  EXPECT_FALSE(figures.merge(figures.payload(specs), 1, specs, 4));
  // Non-finite observations are dropped.
  figures.observe_latency(Link::kInter, NAN);
  figures.observe_latency(Link::kInter, INFINITY);
  EXPECT_FALSE(figures.merge(figures.payload(specs), 1, specs, 8));
  EXPECT_EQ(figures.latency_factor(Link::kInter), 1.0);
}

}  // namespace
}  // namespace terse
