// Error feedback conserves what the ranks put in: over many calls, the sum of the results plus
// every rank's final residuals (and scatter-reduce-allgather's owner residuals) equals the sum
// of the inputs, to fp32 rounding, for every algorithm and every codec that keeps a residual.
// This holds whatever the codec drops, so it checks the algorithms' residual bookkeeping
// independently of the reference model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::ConservationReport;

void expect_conserved(CompressedRanks& ranks, const char* name, const std::string& codec,
                      size_t count) {
  const ConservationReport report =
      test::run_conservation(ranks, *find_compressed_algorithm(name), count, 24, 7);
  EXPECT_TRUE(report.holds()) << name << " " << codec << " n=" << ranks.nranks() << ": "
                              << report.failure << report.violations
                              << " elements off, largest gap " << report.gap << " (allowed "
                              << report.tolerance << ")";
}

class Conservation : public ::testing::TestWithParam<int> {};

TEST_P(Conservation, EveryAlgorithmEveryErrorFeedbackCodec) {
  CompressedRanks ranks(GetParam(), "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(4096);
  for (const char* name : {"sra", "ring", "recursive_doubling", "tree"}) {
    for (const std::string& codec : test::reencoding_codecs()) {
      ranks.use_codec(codec, MemoryKind::kResidual);
      // Lossless (nothing to feed back), or refused with a residual by the policy.
      if (codec == "none" || !ranks.codec(0).stable_under_error_feedback()) continue;
      expect_conserved(ranks, name, codec, 3001);
    }
  }
  for (const char* codec :
       {"topk:ratio=0.05", "topk:ratio=0.6", "randomk:ratio=0.05,shared_seed=false,unbiased=false",
        "threshold:threshold=0.7"}) {
    ranks.use_codec(codec, MemoryKind::kResidual);
    expect_conserved(ranks, "sparse_allgather", codec, 3001);
  }
  ranks.use_codec("randomk:ratio=0.05,unbiased=false", MemoryKind::kResidual);
  expect_conserved(ranks, "randomk", "randomk", 3001);
  ranks.use_codec("powersgd:rank=2", MemoryKind::kResidual);
  expect_conserved(ranks, "powersgd", "powersgd", 60 * 50);
}

INSTANTIATE_TEST_SUITE_P(Ranks, Conservation, ::testing::Values(2, 3, 5));

TEST(ConservationHierarchical, LeadersKeepTheNodesResiduals) {
  CompressedRanks ranks(5, "int8", MemoryKind::kResidual, {"a", "b", "a", "c", "c"});
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(4096);
  for (size_t count : {size_t{1001}, size_t{70001}}) {
    expect_conserved(ranks, "hierarchical", "int8", count);
  }
  ranks.use_codec("topk:ratio=0.05", MemoryKind::kResidual);
  expect_conserved(ranks, "hierarchical", "topk", 3001);
}

TEST(ConservationRail, EachRankKeepsItsChunksResidual) {
  CompressedRanks ranks(6, "int8", MemoryKind::kResidual, {"a", "b", "c", "a", "b", "c"});
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(4096);
  for (size_t count : {size_t{1001}, size_t{140001}}) {
    expect_conserved(ranks, "rail", "int8", count);
  }
  ranks.use_codec("topk:ratio=0.05", MemoryKind::kResidual);
  expect_conserved(ranks, "rail", "topk", 3001);
}

}  // namespace
}  // namespace terse
