// The compressed ring (compressed_ring.cpp) with every codec it accepts on 1, 2, 3, 4 and 8
// ranks. Stated bound: a block's partial sum is encoded at each of the n - 1 hops and its total
// once more, so every element is within S_sum ((1 + c)^n - 1) of the exact sum
// (compressed_error_bound.h), n lossy steps against sra's 2; and every rank is bitwise identical.
// Pipelining (many pieces per block) and the residual of the blocks a rank does not encode.
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

const std::vector<std::string>& accepted_codecs() {
  static const std::vector<std::string> codecs = {"none",
                                                  "fp16",
                                                  "bf16",
                                                  "int8",
                                                  "int4",
                                                  "int2",
                                                  "int8:mode=absmax,rounding=stochastic",
                                                  "qsgd",
                                                  "terngrad",
                                                  "sign",
                                                  "topk:ratio=0.1",
                                                  "randomk:ratio=0.1",
                                                  "threshold:threshold=0.5"};
  return codecs;
}

class RingRanks : public ::testing::TestWithParam<int> {};

TEST_P(RingRanks, EveryCodecWithinTheBound) {
  for (const std::string& codec : accepted_codecs()) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, ring(), DType::kFloat32, count, count + 3);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingRanks, ::testing::Values(1, 2, 3, 4, 8));

TEST(CompressedRing, ManyPiecesDtypesAverageAndInPlace) {
  CompressedRanks ranks(4, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(4096);  // 1024 floats: a 100k tensor is ~25 pieces per block
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    run_and_check(ranks, ring(), dtype, 100003, 1);
    run_and_check(ranks, ring(), dtype, 100003, 2, 0.25);
    run_and_check(ranks, ring(), dtype, 100003, 3, 1.0, true);
  }
  run_and_check(ranks, ring(), DType::kFloat32, 0, 4);
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

TEST(CompressedRing, ResidualKeepsOnlyTheEncodedBlock) {
  // Rank r adds its values exactly to every block but r-1, which it encodes itself: only that
  // block can leave a residual; the others were delivered whole.
  const int n = 4;
  const size_t count = 4000;
  CompressedRanks ranks(n, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(1024);
  run_and_check(ranks, ring(), DType::kFloat32, count, 6);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
    ASSERT_EQ(residual.size(), count) << r;
    const ElementRange own = near_equal_block(count, n, (r + n - 1) % n);
    size_t nonzero_inside = 0;
    for (size_t i = 0; i < count; ++i) {
      const bool inside = i >= own.offset && i < own.offset + own.count;
      if (!inside) ASSERT_EQ(residual[i], 0.0f) << "rank " << r << " element " << i;
      if (inside && residual[i] != 0.0f) ++nonzero_inside;
    }
    EXPECT_GT(nonzero_inside, own.count / 2) << r;  // int8 does lose something there
  }
}

}  // namespace
}  // namespace terse
