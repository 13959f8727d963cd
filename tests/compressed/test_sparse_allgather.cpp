// Sparse allgather (sparse_allgather.cpp) and shared-seed Random-K (randomk_allreduce.cpp) on 1,
// 2, 3, 4 and 8 ranks: one lossy step, so every element within S_sum c of the exact sum
// (compressed_error_bound.h: c = 1 for top-k, threshold and DGC's first step, the stratum length
// for unbiased Random-K), every rank bitwise identical; the dense switch, and the bytes each path
// sends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& sparse() {
  return *find_compressed_algorithm("sparse_allgather");
}
const CompressedAlgorithmInfo& randomk() {
  return *find_compressed_algorithm("randomk");
}

struct SparseCodec {
  const char* spec;
  MemoryKind memory;
};

class SparseRanks : public ::testing::TestWithParam<int> {};

TEST_P(SparseRanks, EverySparseCodecWithinTheBound) {
  const SparseCodec codecs[] = {{"topk:ratio=0.05", MemoryKind::kResidual},
                                {"topk:ratio=0.05,method=exact", MemoryKind::kResidual},
                                {"threshold:threshold=0.6", MemoryKind::kResidual},
                                {"randomk:ratio=0.05,shared_seed=false", MemoryKind::kResidual},
                                {"dgc:ratio=0.05", MemoryKind::kMomentum}};
  for (const SparseCodec& codec : codecs) {
    CompressedRanks ranks(GetParam(), codec.spec, codec.memory);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, sparse(), DType::kFloat32, count, count + 1);
    }
  }
}

TEST_P(SparseRanks, SharedSeedRandomKWithinTheBound) {
  for (const char* codec : {"randomk:ratio=0.05", "randomk:ratio=0.05,unbiased=false"}) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, randomk(), DType::kFloat32, count, count + 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SparseRanks, ::testing::Values(1, 2, 3, 4, 8));

TEST(SparseAllgather, DtypesAverageAndInPlace) {
  CompressedRanks ranks(3, "topk:ratio=0.1", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    run_and_check(ranks, sparse(), dtype, 5000, 1);
    run_and_check(ranks, sparse(), dtype, 5000, 2, 1.0 / 3);
    run_and_check(ranks, sparse(), dtype, 5000, 3, 1.0, true);
  }
  run_and_check(ranks, sparse(), DType::kFloat32, 0, 4);
}

TEST(SparseAllgather, SparseAtOnePercentDenseWhenTheUnionIsDense) {
  const size_t count = 1 << 16;
  const double dense_ring = 2.0 * 7 / 8 * count * 4;  // per rank, 8 ranks
  {
    CompressedRanks ranks(8, "topk:ratio=0.01", MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    run_and_check(ranks, sparse(), DType::kFloat32, count, 5);
    // 1% kept, 8 bytes each, to 7 peers: about 0.07 of the dense tensor.
    for (int r = 0; r < 8; ++r) EXPECT_LT(double(ranks.counters(r).wire_bytes), 0.1 * dense_ring);
  }
  {
    // threshold 0 keeps everything: 8 bytes per element per rank is twice the dense tensor, so
    // the ranks sum decoded dense buffers instead, and each sends what a dense ring sends.
    CompressedRanks ranks(8, "threshold:threshold=0", MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    const test::CaseReport report = run_and_check(ranks, sparse(), DType::kFloat32, count, 6);
    EXPECT_LE(report.max_error, 1e-5);  // nothing dropped
    for (int r = 0; r < 8; ++r) {
      EXPECT_LT(double(ranks.counters(r).wire_bytes), 1.01 * dense_ring) << r;
      EXPECT_GT(double(ranks.counters(r).wire_bytes), 0.99 * dense_ring) << r;
    }
  }
}

TEST(RandomK, SendsOnlyTheSharedValues) {
  const size_t count = 1 << 16;
  CompressedRanks ranks(4, "randomk:ratio=0.01", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  run_and_check(ranks, randomk(), DType::kFloat32, count, 7);
  // k = 655 values of 4 bytes, 2 (n-1)/n of them per rank (plus nothing else).
  const double expected = 2.0 * 3 / 4 * 655 * 4;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(double(ranks.counters(r).wire_bytes), expected, 16.0) << r;
  }
}

}  // namespace
}  // namespace terse
