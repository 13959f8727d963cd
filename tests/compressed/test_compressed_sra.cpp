// Scatter-reduce-allgather (compressed_sra.cpp) with every codec it accepts on 1, 2, 3, 4 and 8
// ranks: every element within the stated bound for two lossy steps,
//   |result - exact| <= S_sum ((1 + c)^2 - 1)        (compressed_error_bound.h),
// and every rank bitwise identical; plus dtypes, average, in place, many pieces, the same bits
// on every call, wire bytes and scratch reuse (error feedback over 200 steps, the owners'
// residual included: test_compressed_error_feedback.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& sra() {
  return *find_compressed_algorithm("sra");
}

class SraRanks : public ::testing::TestWithParam<int> {};

// Every codec, from an empty tensor to one of several pieces per chunk (65539 elements in
// 16 KiB pieces: 2 to 16 pieces per chunk, the last one shorter).
TEST_P(SraRanks, EveryCodecWithinTheBound) {
  for (const std::string& codec : test::reencoding_codecs()) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
      run_and_check(ranks, sra(), DType::kFloat32, count, count + 7);
    }
    ranks.set_piece_bytes(16 << 10);
    run_and_check(ranks, sra(), DType::kFloat32, 65539, 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SraRanks, ::testing::Values(1, 2, 3, 4, 8));

// 16-bit tensors, average (result_scale 1/n) and in place, for a quantizer, a sparsifier and a
// stochastic codec.
TEST(Sra, DtypesAverageAndInPlace) {
  for (const char* codec : {"int8", "topk:ratio=0.1", "qsgd"}) {
    CompressedRanks ranks(4, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, sra(), dtype, 4099, 3);
      run_and_check(ranks, sra(), dtype, 4099, 4, 0.25);
      run_and_check(ranks, sra(), dtype, 4099, 5, 1.0, true);
    }
  }
}

// A million elements in 64 KiB pieces (16 per chunk on 4 ranks); then pieces so small that the
// cap of pieces per chunk decides their size.
TEST(Sra, ManyPieces) {
  CompressedRanks ranks(4, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(64 << 10);
  run_and_check(ranks, sra(), DType::kFloat32, size_t{1} << 20, 12);
  run_and_check(ranks, sra(), DType::kBFloat16, size_t{1} << 20, 13, 0.25, true);
  ranks.set_piece_bytes(4);
  run_and_check(ranks, sra(), DType::kFloat32, 100003, 14);
}

// Owners sum the versions of their chunk in position order, not in order of arrival: the same
// inputs give the same bits on every call.
TEST(Sra, SameInputsSameBits) {
  CompressedRanks ranks(8, "int8", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(8 << 10);
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < 8; ++r) {
    inputs.push_back(test::to_dtype(test::make_rank_input(r, 50000, 21), DType::kFloat32));
  }
  std::vector<std::vector<uint8_t>> first, again;
  const std::vector<ncclResult_t> ok(8, ncclSuccess);
  ASSERT_EQ(ranks.allreduce(sra(), DType::kFloat32, 50000, inputs, &first), ok);
  for (int call = 0; call < 5; ++call) {
    ASSERT_EQ(ranks.allreduce(sra(), DType::kFloat32, 50000, inputs, &again), ok);
    ASSERT_EQ(again, first) << call;
  }
}

TEST(Sra, TheBoundIsNotLooseByConstruction) {
  // int4 on 4 ranks: the error is a real fraction of the bound, so the bound is what is tested.
  CompressedRanks ranks(4, "int4", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  const test::CaseReport report = run_and_check(ranks, sra(), DType::kFloat32, 65536, 9);
  EXPECT_GT(report.max_error, 0.05 * report.bound);
  EXPECT_LE(report.max_error, report.bound);
}

TEST(Sra, SendsAboutTheCodecsShareOfADenseRing) {
  CompressedRanks ranks(4, "int8", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  const size_t count = 1 << 18;
  run_and_check(ranks, sra(), DType::kFloat32, count, 11);
  // A dense ring sends 2 (n-1)/n of the tensor; int8 is 0.258 of fp32 plus headers.
  const double dense = 2.0 * 3 / 4 * count * 4;
  for (int r = 0; r < 4; ++r) {
    EXPECT_LT(double(ranks.counters(r).wire_bytes), 0.27 * dense) << r;
    EXPECT_GT(double(ranks.counters(r).wire_bytes), 0.25 * dense) << r;
  }
}

// No allocation once warm: a second identical call grows no scratch slot.
TEST(Sra, ScratchStopsGrowingAfterTheFirstCall) {
  CompressedRanks ranks(3, "int8", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(16 << 10);
  test::expect_scratch_stops_growing(ranks, sra(), 100000);
}

}  // namespace
}  // namespace terse
