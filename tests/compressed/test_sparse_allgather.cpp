// Sparse allgather (sparse_allgather.cpp) on 1, 2, 3, 4 and 8 ranks with every sparse codec it
// serves: one lossy step, so every element within S_sum c of the exact sum
// (compressed_error_bound.h: c = 1 for top-k, threshold, DGC's first step and biased Random-K, the
// stratum length for unbiased Random-K), every rank bitwise identical (run_and_check). Then the
// dense switch, pinned by the bytes and messages each branch sends (sizes: 8 bytes to each peer;
// sparse: this rank's message to each peer; dense: the exact ring of group_allreduce_sum), and the
// residual: what the result lacks is exactly what the ranks kept for the next step.
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

const CompressedAlgorithmInfo& sparse() {
  return *find_compressed_algorithm("sparse_allgather");
}

struct SparseCodec {
  const char* spec;
  MemoryKind memory;
};

const SparseCodec kCodecs[] = {{"topk:ratio=0.05", MemoryKind::kResidual},
                               {"topk:ratio=0.05,method=exact", MemoryKind::kResidual},
                               {"threshold:threshold=0.6", MemoryKind::kResidual},
                               {"randomk:ratio=0.05,shared_seed=false", MemoryKind::kResidual},
                               {"dgc:ratio=0.05", MemoryKind::kMomentum}};

// Bytes of a top-k message of k fp32 pairs (header, indices, values).
uint64_t topk_message_bytes(uint64_t k) {
  return 32 + 8 * k;
}

// Each rank's bytes in the dense ring of `count` fp32 on n ranks, for counts divisible by n.
uint64_t dense_ring_bytes(int n, uint64_t count) {
  return 2 * static_cast<uint64_t>(n - 1) * (count / static_cast<uint64_t>(n)) * 4;
}

class SparseRanks : public ::testing::TestWithParam<int> {};

TEST_P(SparseRanks, EverySparseCodecWithinTheBound) {
  for (const SparseCodec& codec : kCodecs) {
    CompressedRanks ranks(GetParam(), codec.spec, codec.memory);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, sparse(), DType::kFloat32, count, count + 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SparseRanks, ::testing::Values(1, 2, 3, 4, 8));

TEST(SparseAllgather, SixteenBitAverageAndInPlace) {
  for (const SparseCodec& codec : kCodecs) {
    CompressedRanks ranks(3, codec.spec, codec.memory);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, sparse(), dtype, 5000, 1, 1.0 / 3);
      run_and_check(ranks, sparse(), dtype, 5000, 2, 1.0, /*in_place=*/true);
    }
  }
}

TEST(SparseAllgather, OnePercentTakesTheSparsePath) {
  // Exact top-k keeps exactly k = 655 of 65536: each rank sends its size and its 5272-byte
  // message to 7 peers, 0.08 of the 458752 bytes of the dense ring.
  const int n = 8;
  const uint64_t count = 65536;
  CompressedRanks ranks(n, "topk:k=655,method=exact", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  run_and_check(ranks, sparse(), DType::kFloat32, count, 5);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.counters(r).wire_bytes, 7 * (8 + topk_message_bytes(655))) << r;
    EXPECT_EQ(ranks.counters(r).messages, 2u * 7) << r;
    EXPECT_LT(ranks.counters(r).wire_bytes, dense_ring_bytes(n, count) / 10) << r;
  }
}

TEST(SparseAllgather, DenseUnionTakesTheRing) {
  const int n = 8;
  const uint64_t count = 65536;
  {
    // 90% kept on 8 ranks: the messages (7.2 times the tensor in all) outweigh the ring.
    CompressedRanks ranks(n, "topk:ratio=0.9", MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    run_and_check(ranks, sparse(), DType::kFloat32, count, 6);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ranks.counters(r).wire_bytes, 7 * 8 + dense_ring_bytes(n, count)) << r;
      EXPECT_EQ(ranks.counters(r).messages, 7u + 2 * 7) << r;
    }
  }
  {
    // Threshold 0 keeps everything, so the dense path adds decoded messages that are the inputs:
    // only fp32 summation error remains.
    CompressedRanks ranks(n, "threshold:threshold=0", MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    const test::CaseReport report = run_and_check(ranks, sparse(), DType::kFloat32, count, 7);
    EXPECT_LE(report.max_error, 1e-5);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ranks.counters(r).wire_bytes, 7 * 8 + dense_ring_bytes(n, count)) << r;
    }
  }
}

TEST(SparseAllgather, SwitchesWhereTheBusiestLinkOutweighsTheRing) {
  // n = 4, 1000 elements: dense when 4 * 3 s > 2 * 3 * 4 * 1000, s = 32 + 8 k, i.e. k > 246.
  struct Case {
    const char* codec;
    uint64_t messages;  // 3 sizes, then 3 messages (sparse) or 6 ring steps (dense)
  };
  for (const Case& c : {Case{"topk:k=246,method=exact", 6}, Case{"topk:k=247,method=exact", 9}}) {
    CompressedRanks ranks(4, c.codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    run_and_check(ranks, sparse(), DType::kFloat32, 1000, 8);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(ranks.counters(r).messages, c.messages) << c.codec;
  }
}

TEST(SparseAllgather, TopKByRatioSelectsAndSendsChunkByChunk) {
  // 256-byte pieces: chunks of 16 * 64 = 1024 elements, so 10000 elements make
  // ceil(10000 / 1024) = 10 near-equal chunks of 1000, each keeping round(0.01 * 1000) = 10
  // (exact: always 10): one 32 + 8 * 10 byte message per chunk to each of the 3 peers, and no
  // sizes exchanged first.
  const int n = 4;
  CompressedRanks ranks(n, "topk:ratio=0.01,method=exact", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(256);
  run_and_check(ranks, sparse(), DType::kFloat32, 10000, 10);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.counters(r).messages, 10u * 3) << r;
    EXPECT_EQ(ranks.counters(r).wire_bytes, 10u * 3 * topk_message_bytes(10)) << r;
  }
  // In place, 16-bit, averaged, sampled, and uneven chunks (10007 elements: 7 of 1001, 3 of
  // 1000), against the model.
  ranks.use_codec("topk:ratio=0.01", MemoryKind::kResidual);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    run_and_check(ranks, sparse(), dtype, 10007, 11, 0.25, /*in_place=*/true);
  }
}

TEST(SparseAllgather, AtMostSixtyFourChunks) {
  // 4-byte pieces would make chunks of 16 elements; the tensor is cut into 64 instead.
  const int n = 3;
  CompressedRanks ranks(n, "topk:ratio=0.1,method=exact", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(4);
  run_and_check(ranks, sparse(), DType::kFloat32, 6400, 12);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.counters(r).messages, 64u * 2) << r;
    EXPECT_EQ(ranks.counters(r).wire_bytes, 64u * 2 * topk_message_bytes(10)) << r;
  }
}

TEST(SparseAllgather, FixedKAndWarmUpSendTheWholeTensor) {
  // A fixed k is the whole tensor's (each chunk would keep k), and a warm-up ramp changes the
  // density: both exchange sizes and send one message, whatever the pieces.
  const int n = 4;
  CompressedRanks ranks(n, "topk:k=100,method=exact", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(256);
  run_and_check(ranks, sparse(), DType::kFloat32, 10000, 13);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.counters(r).messages, 2u * 3) << r;
    EXPECT_EQ(ranks.counters(r).wire_bytes, 3 * (8 + topk_message_bytes(100))) << r;
  }
}

TEST(SparseAllgather, NoAllocationOnceWarmChunkedOrWhole) {
  CompressedRanks ranks(4, "topk:ratio=0.01", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_piece_bytes(256);
  test::expect_scratch_stops_growing(ranks, sparse(), 10000);
  ranks.use_codec("topk:k=100", MemoryKind::kResidual);
  test::expect_scratch_stops_growing(ranks, sparse(), 10000);
}

TEST(SparseAllgather, ResidualHoldsWhatTheResultLacks) {
  // result = sum over ranks of decode(message_r) and residual_r = input_r - decode(message_r),
  // so result + sum of residuals = sum of inputs, up to fp32 rounding (|values| < 1, 4 ranks),
  // on both paths: the residual covers the whole tensor.
  const int n = 4;
  const size_t count = 4000;
  for (const char* codec : {"topk:ratio=0.02", "topk:ratio=0.9"}) {
    CompressedRanks ranks(n, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    std::vector<std::vector<uint8_t>> inputs, outputs;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 9), DType::kFloat32));
    }
    const std::vector<ncclResult_t> results =
        ranks.allreduce(sparse(), DType::kFloat32, count, inputs, &outputs);
    for (int r = 0; r < n; ++r) ASSERT_EQ(results[static_cast<size_t>(r)], ncclSuccess) << r;
    std::vector<double> exact(count, 0.0),
        accounted = test::from_dtype(outputs[0], DType::kFloat32, count);
    size_t dropped = 0;
    for (int r = 0; r < n; ++r) {
      const std::vector<double> input =
          test::from_dtype(inputs[static_cast<size_t>(r)], DType::kFloat32, count);
      const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
      ASSERT_EQ(residual.size(), count);
      for (size_t i = 0; i < count; ++i) {
        exact[i] += input[i];
        accounted[i] += residual[i];
        if (residual[i] != 0) ++dropped;
      }
    }
    EXPECT_GT(dropped, 0u) << codec;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(accounted[i], exact[i], 1e-5) << codec << " element " << i;
    }
  }
}

TEST(SparseAllgather, DgcMomentumStaysIdenticalAcrossSteps) {
  // DGC's velocity carries what was not sent to later steps; the ranks' results must still
  // agree bit for bit at every step.
  const int n = 3;
  const size_t count = 3001;
  CompressedRanks ranks(n, "dgc:ratio=0.01,method=exact", MemoryKind::kMomentum);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  uint64_t previous_bytes = 0;
  for (uint64_t step = 0; step < 4; ++step) {
    std::vector<std::vector<uint8_t>> inputs, outputs;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 20 + step), DType::kFloat32));
    }
    const std::vector<ncclResult_t> results =
        ranks.allreduce(sparse(), DType::kFloat32, count, inputs, &outputs, 1.0, false, step);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(results[static_cast<size_t>(r)], ncclSuccess) << r;
      EXPECT_EQ(outputs[static_cast<size_t>(r)], outputs[0]) << "step " << step << " rank " << r;
    }
    // k = 30 of 3001 every step: 2 * (8 + 32 + 8 * 30) bytes to the 2 peers.
    EXPECT_EQ(ranks.counters(0).wire_bytes - previous_bytes, 2 * (8 + topk_message_bytes(30)));
    previous_bytes = ranks.counters(0).wire_bytes;
  }
}

}  // namespace
}  // namespace terse
