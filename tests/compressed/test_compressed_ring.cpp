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

// Every codec, from an empty tensor to one of several pieces per block (65539 elements in
// 16 KiB pieces: 2 to 16 pieces per block, the last one shorter).
TEST_P(RingRanks, EveryCodecWithinTheBound) {
  for (const std::string& codec : accepted_codecs()) {
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
  const int n = 4;
  const size_t count = 4000;
  CompressedRanks ranks(n, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(1024);
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<double> exact(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> values = test::make_rank_input(r, count, 6);
    for (size_t i = 0; i < count; ++i) exact[i] += values[i];
    inputs.push_back(test::to_dtype(values, DType::kFloat32));
  }
  std::vector<std::vector<uint8_t>> outputs;
  ASSERT_EQ(ranks.allreduce(ring(), DType::kFloat32, count, inputs, &outputs),
            std::vector<ncclResult_t>(n, ncclSuccess));
  const std::vector<double> got = test::from_dtype(outputs[0], DType::kFloat32, count);
  std::vector<double> residual_sum(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
    ASSERT_EQ(residual.size(), count) << r;
    size_t nonzero = 0;
    for (size_t i = 0; i < count; ++i) {
      residual_sum[i] += residual[i];
      if (residual[i] != 0.0f) ++nonzero;
    }
    EXPECT_GT(nonzero, count / 2) << "rank " << r;  // int8 loses something nearly everywhere
  }
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(got[i], exact[i] - residual_sum[i], 1e-5) << "element " << i;
  }
}

// No allocation once warm: a second identical call grows no scratch slot.
TEST(CompressedRing, ScratchStopsGrowingAfterTheFirstCall) {
  CompressedRanks ranks(3, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(16 << 10);
  run_and_check(ranks, ring(), DType::kFloat32, 100000, 1);
  std::vector<uint64_t> growths;
  for (int r = 0; r < 3; ++r) growths.push_back(ranks.scratch(r).growths());
  for (int call = 0; call < 3; ++call) run_and_check(ranks, ring(), DType::kFloat32, 100000, 2);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ranks.scratch(r).growths(), growths[size_t(r)]) << r;
}

}  // namespace
}  // namespace terse
