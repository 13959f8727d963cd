// The checks bite: with a deliberate mistake in the compressed path (compressed_mutation.h) —
// the result zeroed, one rank's contribution dropped or doubled, the residual never updated, or
// compensated with a stale one — both the reference-model check and the conservation check fail,
// for every compressed algorithm, while every mutated call itself succeeds (a call that merely
// failed would prove nothing). A check that passed here would be a check that cannot fail.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed/compressed_mutation.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;

// Turns the mutation off again whatever the test does.
class MutationScope {
 public:
  explicit MutationScope(CompressedMutation mutation) { set_compressed_mutation(mutation); }
  ~MutationScope() { set_compressed_mutation(CompressedMutation::kNone); }
};

struct AlgorithmCase {
  const char* algorithm;
  const char* codec;
  size_t count;
  std::vector<std::string> hosts;
};

const std::vector<AlgorithmCase>& cases() {
  static const std::vector<AlgorithmCase> all = {
      {"sra", "int8", 3001, {}},
      {"ring", "sign", 3001, {}},
      {"recursive_doubling", "qsgd", 3001, {}},
      {"tree", "int4", 3001, {}},
      {"sparse_allgather", "topk:ratio=0.05", 3001, {}},
      // 5 chunks of 16 pieces of 4096 bytes: the chunked way.
      {"sparse_allgather", "topk:ratio=0.05", 70001, {}},
      {"randomk", "randomk:ratio=0.05,unbiased=false", 3001, {}},
      {"powersgd", "powersgd:rank=2", 60 * 50, {}},
      {"hierarchical", "int8", 70001, {"a", "a", "b", "c"}},
  };
  return all;
}

const CompressedMutation kMutations[] = {
    CompressedMutation::kZeroResult, CompressedMutation::kDropContribution,
    CompressedMutation::kDoubleContribution, CompressedMutation::kSkipResidualUpdate,
    CompressedMutation::kStaleResidual};

class EveryMutation : public ::testing::TestWithParam<CompressedMutation> {};

TEST_P(EveryMutation, TheModelCheckFailsForEveryAlgorithm) {
  for (const AlgorithmCase& c : cases()) {
    CompressedRanks ranks(4, c.codec, MemoryKind::kResidual, c.hosts);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_piece_bytes(4096);
    const CompressedAlgorithmInfo& algorithm = *find_compressed_algorithm(c.algorithm);
    // Unmutated, the same run passes: the failure below is the mutation's.
    ASSERT_TRUE(test::run_model_steps(ranks, algorithm, DType::kFloat32, c.count, 3, 5).ok())
        << c.algorithm;
    MutationScope scope(GetParam());
    const test::ModelCheck check =
        test::run_model_steps(ranks, algorithm, DType::kFloat32, c.count, 3, 5);
    // The mutated calls succeed: it is the model check that must catch them, not an error.
    EXPECT_EQ(check.failure, "") << c.algorithm << " under "
                                 << compressed_mutation_name(GetParam());
    EXPECT_GT(check.result_mismatches + check.residual_mismatches, 0u)
        << c.algorithm << " " << c.codec << " under " << compressed_mutation_name(GetParam());
  }
}

TEST_P(EveryMutation, TheConservationCheckFailsForEveryAlgorithm) {
  for (const AlgorithmCase& c : cases()) {
    CompressedRanks ranks(4, c.codec, MemoryKind::kResidual, c.hosts);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_piece_bytes(4096);
    const CompressedAlgorithmInfo& algorithm = *find_compressed_algorithm(c.algorithm);
    ASSERT_TRUE(test::run_conservation(ranks, algorithm, c.count, 8, 5).holds()) << c.algorithm;
    MutationScope scope(GetParam());
    const test::ConservationReport report = test::run_conservation(ranks, algorithm, c.count, 8, 5);
    EXPECT_EQ(report.failure, "") << c.algorithm << " under "
                                  << compressed_mutation_name(GetParam());
    EXPECT_GT(report.violations, 0u)
        << c.algorithm << " " << c.codec << " under " << compressed_mutation_name(GetParam())
        << ": gap " << report.gap;
  }
}

INSTANTIATE_TEST_SUITE_P(Mutations, EveryMutation, ::testing::ValuesIn(kMutations),
                         [](const auto& info) {
                           return std::string(compressed_mutation_name(info.param));
                         });

}  // namespace
}  // namespace terse
