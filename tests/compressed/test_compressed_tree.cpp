// The compressed binary tree (compressed_tree.cpp) with every codec it accepts on 1, 2, 3, 4, 5
// and 8 ranks. Stated bound (compressed_error_bound.h): every element within
// S_sum ((1 + c)^k - 1) of the float64 sum, k = depth + 1 = floor(log2 n) + 1 (the deepest leaf's
// encode, one per inner ancestor, the root's encode of the total); and every rank bitwise
// identical. Plus dtypes, average, in place, wire bytes against fp32 messages, error feedback
// (the result is the sum less the residuals: each rank keeps the error of its one encode) and
// scratch reuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& tree() {
  return *find_compressed_algorithm("tree");
}

// Children of group position r in the heap-ordered tree of n positions.
int child_count(int r, int n) {
  return (2 * r + 1 < n ? 1 : 0) + (2 * r + 2 < n ? 1 : 0);
}

class TreeRanks : public ::testing::TestWithParam<int> {};

// Every codec, from an empty tensor to 65539 elements (a partial last codec block).
TEST_P(TreeRanks, EveryCodecWithinTheBound) {
  for (const std::string& codec : test::reencoding_codecs()) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    EXPECT_TRUE(tree().accepts(ranks.codec(0), 1001)) << codec;
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, tree(), DType::kFloat32, count, count + 11);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TreeRanks, ::testing::Values(1, 2, 3, 4, 5, 8));

// 16-bit tensors, average (result_scale 1/n) and in place, for a quantizer, a sparsifier and a
// stochastic codec, on 6 ranks (position 2 has a single child).
TEST(CompressedTree, DtypesAverageAndInPlace) {
  const int n = 6;
  for (const char* codec : {"int8", "topk:ratio=0.1", "qsgd"}) {
    CompressedRanks ranks(n, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, tree(), dtype, 3001, 1);
      run_and_check(ranks, tree(), dtype, 3001, 2, 1.0 / n);
      run_and_check(ranks, tree(), dtype, 3001, 3, 1.0, true);
      run_and_check(ranks, tree(), dtype, 3001, 4, 1.0 / n, true);
    }
  }
}

// int8 messages are about a quarter of fp32's: every rank sends less than 0.3 of what the same
// messages of the raw fp32 tensor would carry. And each rank sends one message up (not the
// root) and one down to each child.
TEST(CompressedTree, Int8SendsUnderThreeTenthsOfFp32) {
  const size_t count = 65536;
  const double fp32_message = double(count) * 4;
  for (int n : {2, 5, 8}) {
    CompressedRanks ranks(n, "int8", MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    run_and_check(ranks, tree(), DType::kFloat32, count, 5);
    for (int r = 0; r < n; ++r) {
      const uint64_t expected = (r > 0 ? 1 : 0) + child_count(r, n);
      EXPECT_EQ(ranks.counters(r).messages, expected) << "n=" << n << " rank " << r;
      EXPECT_LT(double(ranks.counters(r).wire_bytes), 0.3 * double(expected) * fp32_message)
          << "n=" << n << " rank " << r;
    }
  }
}

// Error feedback: starting from zero residuals, every rank keeps the error of its one encode
// (a leaf's contribution, an inner rank's partial sum, the root's total), so the result is
// exactly the inputs' sum less the ranks' new residuals, up to fp32 rounding of the few
// additions (1e-5 on sums of a few units; one int8 step of error is ~1e-2). Every rank keeps a
// residual (int8 loses something nearly everywhere).
TEST(CompressedTree, ResultIsTheSumLessTheResiduals) {
  for (int n : {2, 6}) {
    CompressedRanks ranks(n, "int8", MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    test::expect_result_is_sum_less_residuals(ranks, tree(), 4000);
  }
}

// No allocation once warm: further identical calls grow no scratch slot.
TEST(CompressedTree, ScratchStopsGrowingAfterTheFirstCall) {
  CompressedRanks ranks(5, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  test::expect_scratch_stops_growing(ranks, tree(), 50000);
}

}  // namespace
}  // namespace terse
