// Compressed recursive doubling (compressed_recursive_doubling.cpp) with every codec it accepts
// on 1, 2, 3, 4, 5 and 8 ranks (3 and 5 fold one rank in, 6 two). Stated bound
// (compressed_error_bound.h): every element within S_sum ((1 + c)^k - 1) of the float64 sum,
// k = log2 n for a power of two and log2 p + 2 otherwise (p the power of two below n: the folded
// rank's encode, the rounds, the unfold); and every rank, folded ones included, bitwise identical.
// Plus dtypes, average, in place, wire bytes against fp32 exchanges, error feedback (the result is
// the sum less the residuals: every encode's error is kept by one rank) and scratch reuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& doubling() {
  return *find_compressed_algorithm("recursive_doubling");
}

class DoublingRanks : public ::testing::TestWithParam<int> {};

// Every codec, from an empty tensor to 65539 elements (a partial last codec block).
TEST_P(DoublingRanks, EveryCodecWithinTheBound) {
  for (const std::string& codec : test::reencoding_codecs()) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    EXPECT_TRUE(doubling().accepts(ranks.codec(0), 1001)) << codec;
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, doubling(), DType::kFloat32, count, count + 7);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DoublingRanks, ::testing::Values(1, 2, 3, 4, 5, 8));

// 16-bit tensors, average (result_scale 1/n) and in place, for a quantizer, a sparsifier and a
// stochastic codec, on 6 ranks: two fold pairs, so two hosts send the unfold message.
TEST(CompressedRecursiveDoubling, DtypesAverageAndInPlace) {
  const int n = 6;
  for (const char* codec : {"int8", "topk:ratio=0.1", "qsgd"}) {
    CompressedRanks ranks(n, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, doubling(), dtype, 3001, 1);
      run_and_check(ranks, doubling(), dtype, 3001, 2, 1.0 / n);
      run_and_check(ranks, doubling(), dtype, 3001, 3, 1.0, true);
      run_and_check(ranks, doubling(), dtype, 3001, 4, 1.0 / n, true);
    }
  }
}

// int8 messages are about a quarter of fp32's: every rank sends less than 0.3 of what the same
// exchanges of the raw fp32 tensor would carry (one whole tensor per message). And each rank
// sends what its role says: one message per round, a fold host one more (the unfold), a folded
// rank just its contribution.
TEST(CompressedRecursiveDoubling, Int8SendsUnderThreeTenthsOfFp32) {
  const size_t count = 65536;
  const double fp32_message = double(count) * 4;
  for (int n : {4, 5, 8}) {
    CompressedRanks ranks(n, "int8", MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    run_and_check(ranks, doubling(), DType::kFloat32, count, 5);
    int p = 1, rounds = 0;
    while (p * 2 <= n) p *= 2, ++rounds;
    for (int r = 0; r < n; ++r) {
      const uint64_t expected = r >= p ? 1 : rounds + (r < n - p ? 1 : 0);
      EXPECT_EQ(ranks.counters(r).messages, expected) << "n=" << n << " rank " << r;
      EXPECT_LT(double(ranks.counters(r).wire_bytes), 0.3 * double(expected) * fp32_message)
          << "n=" << n << " rank " << r;
    }
  }
}

// Error feedback: starting from zero residuals, every encode's error is kept by exactly one
// rank (round 0 by each rank, later rounds and the unfold by one rank of each block), so the
// result is exactly the inputs' sum less the ranks' new residuals, up to fp32 rounding of the
// few additions (1e-5 on sums near 6; one int8 step of error is ~1e-2). Every rank keeps a
// residual (int8 loses something nearly everywhere).
TEST(CompressedRecursiveDoubling, ResultIsTheSumLessTheResiduals) {
  for (int n : {3, 6, 8}) {
    CompressedRanks ranks(n, "int8", MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    test::expect_result_is_sum_less_residuals(ranks, doubling(), 4000);
  }
}

// No allocation once warm: further identical calls grow no scratch slot.
TEST(CompressedRecursiveDoubling, ScratchStopsGrowingAfterTheFirstCall) {
  CompressedRanks ranks(5, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  test::expect_scratch_stops_growing(ranks, doubling(), 50000);
}

}  // namespace
}  // namespace terse
