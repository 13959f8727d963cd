// The compressed ring (compressed_ring.cpp) with every codec it accepts on 1, 2, 3, 4 and 8
// ranks. Stated bound: a block's partial sum is encoded at each of the n - 1 hops and its total
// once more, so every element is within S_sum ((1 + c)^n - 1) of the exact sum
// (compressed_error_bound.h), n lossy steps against sra's 2; and every rank is bitwise identical.
// Pipelining (many pieces per block), dtypes, average, in place, error feedback of every encode
// (test_compressed_error_feedback.cpp follows it over 200 steps) and scratch reuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/ring_pattern.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& ring() {
  return *find_compressed_algorithm("ring");
}

class RingRanks : public ::testing::TestWithParam<int> {};

// Every codec, from an empty tensor to one of several pieces per block (65539 elements in
// 16 KiB pieces: 2 to 16 pieces per block, the last one shorter).
TEST_P(RingRanks, EveryCodecWithinTheBound) {
  for (const std::string& codec : test::reencoding_codecs()) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
      run_and_check(ranks, ring(), DType::kFloat32, count, count + 3);
    }
    ranks.set_piece_bytes(16 << 10);
    run_and_check(ranks, ring(), DType::kFloat32, 65539, 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingRanks, ::testing::Values(1, 2, 3, 4, 8));

// Many pieces (4 KiB: ~25 per block), 16-bit tensors, average and in place, for a quantizer, a
// sparsifier and a stochastic codec; then a million elements.
TEST(CompressedRing, ManyPiecesDtypesAverageAndInPlace) {
  for (const char* codec : {"int8", "topk:ratio=0.1", "qsgd"}) {
    CompressedRanks ranks(4, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_piece_bytes(4096);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, ring(), dtype, 100003, 1);
      run_and_check(ranks, ring(), dtype, 100003, 2, 0.25);
      run_and_check(ranks, ring(), dtype, 100003, 3, 1.0, true);
    }
  }
  CompressedRanks ranks(3, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(64 << 10);
  run_and_check(ranks, ring(), DType::kFloat32, size_t{1} << 20, 4);
  // Pieces so small that the tag's step field decides their size.
  ranks.set_piece_bytes(4);
  run_and_check(ranks, ring(), DType::kFloat32, 100003, 5);
}

TEST(CompressedRing, ErrorGrowsWithRanksUnlikeSra) {
  // The same int4 inputs on 8 ranks: the ring's n lossy steps against sra's 2 show.
  double ring_error = 0, sra_error = 0;
  {
    CompressedRanks ranks(8, "int4", MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ring_error = run_and_check(ranks, ring(), DType::kFloat32, 65536, 5).max_error;
    sra_error = run_and_check(ranks, *find_compressed_algorithm("sra"), DType::kFloat32, 65536, 5)
                    .max_error;
  }
  EXPECT_GT(ring_error, sra_error);
}

// Error feedback: each rank encodes every element once (its block r-1 as its own value, the
// others inside the partial sums it re-encodes) and keeps that encode's error as the residual.
// Starting from zero residuals, the result is then exactly the inputs' sum less the ranks'
// residuals (up to fp32 rounding of the few additions), and every block leaves a residual.
TEST(CompressedRing, ResultIsTheSumLessTheResiduals) {
  CompressedRanks ranks(4, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(1024);
  test::expect_result_is_sum_less_residuals(ranks, ring(), 4000);
}

// No allocation once warm: a second identical call grows no scratch slot.
TEST(CompressedRing, ScratchStopsGrowingAfterTheFirstCall) {
  CompressedRanks ranks(3, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(16 << 10);
  test::expect_scratch_stops_growing(ranks, ring(), 100000);
}

}  // namespace
}  // namespace terse
