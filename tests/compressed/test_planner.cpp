// The planner (collectives/compressed/planner.h) over given figures: where it switches from the
// latency-bound algorithm to the bandwidth-bound one, what `auto` picks on a slow network and on
// shared memory, how max_rel_err limits it, and that hierarchical and flat plans compete. Expected
// values come from closed forms written here, not from the cost model's code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/planner.h"
#include "compressed/planner_test_support.h"

namespace terse {
namespace {

TEST(Planner, SwitchesFromRecursiveDoublingToSraWhereAlphaBetaSaysSo) {
  // 4 ranks on one node, codec work free: recursive doubling takes 2 (alpha + W / beta), sra
  // 2 (n - 1) alpha + 2 (n - 1) / n W / beta, so sra wins once W > 8 alpha beta.
  Codecs codecs;
  Codec* int8 = codecs.get("int8");
  const double alpha = 10e-6, beta = 1e9;
  std::map<std::string, CodecSpeed> speeds = {{int8->spec(), CodecSpeed{1e18, 1e18}}};
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  auto planner = Planner::for_figures(0, hosts(1, 4), links(alpha, beta, alpha, beta), settings,
                                      codecs.maker(), speeds, 1e18);
  const double crossing = 8 * alpha * beta;
  int below = 0, above = 0;
  for (size_t count = 256; count <= (size_t{4} << 20); count *= 2) {
    PlanRequest request;
    request.count = count;
    request.codec = int8;
    CallPlan plan;
    ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
    const double wire = static_cast<double>(int8->wire_bytes(count, DType::kFloat32, {}));
    const std::string algorithm = chosen(plan).algorithm;
    if (wire < crossing * 0.95) {
      EXPECT_EQ(algorithm, "recursive_doubling") << count << " elements, " << wire << " bytes";
      ++below;
    } else if (wire > crossing * 1.05) {
      EXPECT_EQ(algorithm, "sra") << count << " elements, " << wire << " bytes";
      ++above;
    }
    EXPECT_EQ(plan.algorithm, find_compressed_algorithm(algorithm));
  }
  EXPECT_GT(below, 3);
  EXPECT_GT(above, 3);
}

TEST(Planner, ChoosesTheFastestPredictionAndReportsEveryCandidate) {
  Codecs codecs;
  Codec* int8 = codecs.get("int8");
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  auto planner = Planner::for_figures(1, hosts(2, 2), links(2e-6, 4e9, 20e-6, 125e6), settings,
                                      codecs.maker(), realistic_speeds(codecs), 5e9);
  PlanRequest request;
  request.count = 16 << 20;
  request.codec = int8;
  CallPlan plan;
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  // tree, recursive doubling and sra, each flat, rail-aligned and hierarchical.
  ASSERT_EQ(plan.candidates.size(), 9u);
  for (const PlanCandidate& candidate : plan.candidates) {
    EXPECT_GE(candidate.prediction.seconds, chosen(plan).prediction.seconds) << candidate.algorithm;
    EXPECT_GT(candidate.prediction.seconds, 0);
  }
  EXPECT_EQ(plan.group.ranks.size(), 4u);
  EXPECT_EQ(plan.group.index, 1);
  EXPECT_EQ(plan.piece_bytes, size_t{256} << 10);
  EXPECT_NE(plan.describe().find("predicted"), std::string::npos);
}

TEST(Planner, AutoCompressesOnASlowNetworkWithinItsBound) {
  Codecs codecs;
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  // 4 nodes at 1 Gbit/s, one rank each: uncompressed, 64 MiB takes 2 * 3/4 * 64 MiB / 125 MB/s.
  auto planner = Planner::for_figures(0, hosts(4, 1), links(2e-6, 4e9, 50e-6, 125e6), settings,
                                      codecs.maker(), realistic_speeds(codecs), 5e9);
  PlanRequest request;
  request.count = 16 << 20;
  request.max_rel_err = 0.01;
  CallPlan plan;
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  ASSERT_NE(plan.codec, nullptr) << plan.describe();
  // int8 minmax nearest: c = 1/255 per encode, sra's 2 steps give 0.0079 <= 0.01; int4 (c = 1/15)
  // and the sparse and low-rank codecs (c = 1) cannot keep it.
  EXPECT_EQ(plan.codec->spec(), codecs.get("int8")->spec()) << plan.describe();
  EXPECT_LE(chosen(plan).error_bound, 0.01);
  const double uncompressed = 2.0 * 3 / 4 * (64 << 20) / 125e6;
  EXPECT_LT(chosen(plan).prediction.seconds, uncompressed / 3) << plan.describe();
  for (const PlanCandidate& candidate : plan.candidates) {
    EXPECT_LE(candidate.error_bound, 0.01) << candidate.codec << " " << candidate.algorithm;
  }

  // A looser bound lets it go further down the list.
  request.max_rel_err = 0.2;
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  ASSERT_NE(plan.codec, nullptr);
  EXPECT_EQ(plan.codec->spec(), codecs.get("int4")->spec()) << plan.describe();

  // A bound no codec keeps: uncompressed.
  request.max_rel_err = 1e-9;
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  EXPECT_EQ(plan.codec, nullptr) << plan.describe();
}

TEST(Planner, AutoCompressesOnlyWhenPredictedAFifthFasterThanUncompressed) {
  // From a link where the codecs are the bottleneck to one where the wire is: at every rate the
  // best compressed candidate must be predicted at least 1.2x faster than the uncompressed one,
  // or auto stays uncompressed (a gain inside the model's error is not worth a lossy result).
  Codecs codecs;
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  int margin_cases = 0, compressed_cases = 0, uncompressed_cases = 0;
  for (double gbps = 1.0; gbps <= 40.0; gbps *= 1.02) {
    auto planner = Planner::for_figures(0, hosts(4, 1), links(2e-6, 4e9, 20e-6, gbps * 1e9 / 8),
                                        settings, codecs.maker(), realistic_speeds(codecs), 5e9);
    PlanRequest request;
    request.count = 16 << 20;
    request.max_rel_err = 0.01;
    CallPlan plan;
    ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
    double uncompressed = 0, best_compressed = 1e300;
    for (const PlanCandidate& candidate : plan.candidates) {
      if (candidate.codec == "none") {
        uncompressed = candidate.prediction.seconds;
      } else {
        best_compressed = std::min(best_compressed, candidate.prediction.seconds);
      }
    }
    ASSERT_GT(uncompressed, 0) << plan.describe();
    const double gain = uncompressed / best_compressed;
    if (std::abs(gain - 1.2) < 1e-3) continue;  // too close to call
    if (gain > 1.0 && gain < 1.2) ++margin_cases;
    if (gain > 1.2) {
      EXPECT_NE(plan.codec, nullptr) << gbps << " Gbit/s: " << plan.describe();
      ++compressed_cases;
    } else {
      EXPECT_EQ(plan.codec, nullptr) << gbps << " Gbit/s: " << plan.describe();
      ++uncompressed_cases;
    }
  }
  // The sweep crosses the whole range: clear gains, gains below the margin, and losses.
  EXPECT_GT(compressed_cases, 0);
  EXPECT_GT(margin_cases, 0);
  EXPECT_GT(uncompressed_cases, margin_cases);
}

TEST(Planner, AutoLeavesSharedMemoryUncompressed) {
  Codecs codecs;
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  // One node of 4 ranks whose shared memory moves 4 GB/s: no codec here encodes that fast.
  auto planner = Planner::for_figures(2, hosts(1, 4), links(2e-6, 4e9, 20e-6, 1.25e9), settings,
                                      codecs.maker(), realistic_speeds(codecs), 5e9);
  for (size_t count : {size_t{1} << 10, size_t{1} << 18, size_t{16} << 20}) {
    PlanRequest request;
    request.count = count;
    request.max_rel_err = 0.01;
    CallPlan plan;
    ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
    EXPECT_EQ(plan.codec, nullptr) << count << ": " << plan.describe();
    EXPECT_EQ(chosen(plan).codec, "none");
  }
}

TEST(Planner, NodesOfSeveralRanksBehindASlowLinkGoByRailsOrThroughTheirLeaders) {
  Codecs codecs;
  Codec* int8 = codecs.get("int8");
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  LinkModel one_nic = links(2e-6, 8e9, 50e-6, 125e6);
  auto planner = Planner::for_figures(0, hosts(2, 4), one_nic, settings, codecs.maker(),
                                      realistic_speeds(codecs), 5e9);
  PlanRequest request;
  request.count = 16 << 20;
  request.codec = int8;
  CallPlan plan;
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  // Flat sra sends 4 ranks' chunks through each node's link at once (4 * 4 / 8 of the encoded
  // tensor, twice); through leaders or by rails each node sends one node sum's (1 / 2, twice),
  // and by rails four ranks share the codec work a leader does alone.
  auto find = [&](const std::string& algorithm) -> const PlanCandidate* {
    for (const PlanCandidate& c : plan.candidates) {
      if (c.algorithm == algorithm) return &c;
    }
    return nullptr;
  };
  ASSERT_NE(find("sra"), nullptr);
  ASSERT_NE(find("rail/sra"), nullptr);
  ASSERT_NE(find("hierarchical/sra"), nullptr);
  EXPECT_LT(find("hierarchical/sra")->prediction.seconds, find("sra")->prediction.seconds / 2);
  EXPECT_LT(find("rail/sra")->prediction.seconds, find("hierarchical/sra")->prediction.seconds);
  EXPECT_STREQ(plan.algorithm->name, "rail") << plan.describe();
  ASSERT_NE(plan.inner, nullptr);
  // With a NIC per local rank the four rails run side by side: the wire part shrinks 4x.
  LinkModel four_nics = one_nic;
  four_nics.nics = 4;
  auto railed = Planner::for_figures(0, hosts(2, 4), four_nics, settings, codecs.maker(),
                                     realistic_speeds(codecs), 5e9);
  CallPlan with_rails;
  ASSERT_EQ(railed->plan(request, &with_rails), ncclSuccess);
  EXPECT_LT(with_rails.candidates[static_cast<size_t>(with_rails.chosen)].prediction.seconds,
            find("rail/sra")->prediction.seconds * 0.6)
      << with_rails.describe();

  // Nodes of unequal size (3 + 1): no rails; the leaders' plan wins.
  auto uneven = Planner::for_figures(0, {"a", "a", "a", "b"}, one_nic, settings, codecs.maker(),
                                     realistic_speeds(codecs), 5e9);
  ASSERT_EQ(uneven->plan(request, &plan), ncclSuccess);
  EXPECT_EQ(find("rail/sra"), nullptr);
  EXPECT_STREQ(plan.algorithm->name, "hierarchical") << plan.describe();

  // A codec with per-tensor state (PowerSGD) has no rails either.
  request.codec = codecs.get("powersgd:rank=4");
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  for (const PlanCandidate& candidate : plan.candidates) {
    EXPECT_EQ(candidate.algorithm.find("rail"), std::string::npos) << candidate.algorithm;
  }

  settings.hierarchy = HierarchyMode::kOff;
  request.codec = int8;
  planner = Planner::for_figures(0, hosts(2, 4), one_nic, settings, codecs.maker(),
                                 realistic_speeds(codecs), 5e9);
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  EXPECT_EQ(plan.inner, nullptr);
  for (const PlanCandidate& candidate : plan.candidates) {
    EXPECT_EQ(candidate.algorithm.find("hierarchical"), std::string::npos);
    EXPECT_EQ(candidate.algorithm.find("rail"), std::string::npos);
  }
}

TEST(Planner, ForcedAlgorithmIsTheOnlyCandidate) {
  Codecs codecs;
  Planner::Settings settings;
  settings.piece_bytes = 256 << 10;
  settings.forced = find_compressed_algorithm("ring");
  auto planner = Planner::for_figures(0, hosts(1, 3), links(2e-6, 4e9, 20e-6, 1.25e9), settings,
                                      codecs.maker(), realistic_speeds(codecs), 5e9);
  PlanRequest request;
  request.count = 1 << 20;
  request.codec = codecs.get("int8");
  CallPlan plan;
  ASSERT_EQ(planner->plan(request, &plan), ncclSuccess);
  ASSERT_EQ(plan.candidates.size(), 1u);
  EXPECT_STREQ(plan.algorithm->name, "ring");
  // ...and a codec it cannot run is refused, naming the variable.
  request.codec = codecs.get("powersgd:rank=4");
  EXPECT_EQ(planner->plan(request, &plan), ncclInvalidArgument);
}

}  // namespace
}  // namespace terse
