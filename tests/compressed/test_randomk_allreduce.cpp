// Shared-seed Random-K (randomk_allreduce.cpp) on 1, 2, 3, 4 and 8 ranks, unbiased and not: one
// lossy step, so every element within S_sum c of the exact sum (compressed_error_bound.h: c = 1
// biased, the stratum length unbiased), every rank bitwise identical (run_and_check). Then what
// makes it Random-K with a shared seed: one kept position per stratum, the same on every rank,
// holding the exact sum (times the stratum length when unbiased); each rank sends only its share
// of the k fp32 values of a ring; the residual holds what the result lacks; and a codec whose
// messages carry indices is refused, not summed as values.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "codecs/sparse_math.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;

const CompressedAlgorithmInfo& randomk() {
  return *find_compressed_algorithm("randomk");
}

const char* const kCodecs[] = {"randomk:ratio=0.05", "randomk:ratio=0.05,unbiased=false"};

std::vector<std::vector<uint8_t>> fp32_inputs(int n, size_t count, uint64_t salt) {
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(test::to_dtype(test::make_rank_input(r, count, salt), DType::kFloat32));
  }
  return inputs;
}

class RandomKRanks : public ::testing::TestWithParam<int> {};

TEST_P(RandomKRanks, WithinTheBound) {
  for (const char* codec : kCodecs) {
    CompressedRanks ranks(GetParam(), codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{65539}}) {
      run_and_check(ranks, randomk(), DType::kFloat32, count, count + 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RandomKRanks, ::testing::Values(1, 2, 3, 4, 8));

TEST(RandomK, SixteenBitAverageAndInPlace) {
  for (const char* codec : kCodecs) {
    CompressedRanks ranks(3, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      run_and_check(ranks, randomk(), dtype, 5000, 1, 1.0 / 3);
      run_and_check(ranks, randomk(), dtype, 5000, 2, 1.0, /*in_place=*/true);
    }
  }
}

TEST(RandomK, OneSharedPositionPerStratumHoldingTheExactSum) {
  // k = 100 strata of 1001 elements; without memory the contribution is the input itself.
  const int n = 4;
  const size_t count = 1001, kept = 100;
  for (bool unbiased : {false, true}) {
    const std::string codec =
        std::string("randomk:ratio=0.1,unbiased=") + (unbiased ? "true" : "false");
    CompressedRanks ranks(n, codec, MemoryKind::kNone);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    const std::vector<std::vector<uint8_t>> inputs = fp32_inputs(n, count, 3);
    std::vector<std::vector<uint8_t>> outputs;
    const std::vector<ncclResult_t> results =
        ranks.allreduce(randomk(), DType::kFloat32, count, inputs, &outputs);
    for (int r = 0; r < n; ++r) ASSERT_EQ(results[static_cast<size_t>(r)], ncclSuccess) << r;
    std::vector<double> exact(count, 0.0);
    for (const auto& input : inputs) {
      const std::vector<double> values = test::from_dtype(input, DType::kFloat32, count);
      for (size_t i = 0; i < count; ++i) exact[i] += values[i];
    }
    const std::vector<double> result = test::from_dtype(outputs[0], DType::kFloat32, count);
    StratumWalk strata(count, kept);
    for (size_t j = 0; j < kept; ++j) {
      const size_t begin = strata.begin();
      strata.advance();
      const size_t end = strata.begin();
      const double scale = unbiased ? static_cast<double>(end - begin) : 1.0;
      size_t nonzero = 0;
      for (size_t i = begin; i < end; ++i) {
        if (result[i] == 0) continue;
        ++nonzero;
        EXPECT_NEAR(result[i], scale * exact[i], 1e-5 * scale) << codec << " element " << i;
      }
      EXPECT_EQ(nonzero, 1u) << codec << " stratum " << j;
    }
  }
}

TEST(RandomK, SendsOnlyItsShareOfTheSharedValues) {
  // k = 655 of 65536: a ring over 4 ranks moves 2 (n-1)/n k 4 = 3930 bytes per rank, blocks of
  // 164 or 163 values, so within 2 * 3 * 4 bytes of that; no header, no indices, 2 (n-1)
  // messages.
  const int n = 4;
  CompressedRanks ranks(n, "randomk:ratio=0.01", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  run_and_check(ranks, randomk(), DType::kFloat32, 65536, 4);
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(static_cast<double>(ranks.counters(r).wire_bytes), 2.0 * 3 / 4 * 655 * 4, 24.0)
        << r;
    EXPECT_EQ(ranks.counters(r).messages, 2u * 3) << r;
  }
}

TEST(RandomK, ResidualHoldsWhatTheResultLacks) {
  // Decoding is linear, so result = sum of decode(message_r) and residual_r = input_r -
  // decode(message_r) give result + sum of residuals = sum of inputs, up to fp32 rounding.
  const int n = 4;
  const size_t count = 4000;
  for (const char* codec : kCodecs) {
    CompressedRanks ranks(n, codec, MemoryKind::kResidual);
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    const std::vector<std::vector<uint8_t>> inputs = fp32_inputs(n, count, 5);
    std::vector<std::vector<uint8_t>> outputs;
    const std::vector<ncclResult_t> results =
        ranks.allreduce(randomk(), DType::kFloat32, count, inputs, &outputs);
    for (int r = 0; r < n; ++r) ASSERT_EQ(results[static_cast<size_t>(r)], ncclSuccess) << r;
    std::vector<double> exact(count, 0.0);
    std::vector<double> accounted = test::from_dtype(outputs[0], DType::kFloat32, count);
    for (int r = 0; r < n; ++r) {
      const std::vector<double> input =
          test::from_dtype(inputs[static_cast<size_t>(r)], DType::kFloat32, count);
      const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
      ASSERT_EQ(residual.size(), count);
      for (size_t i = 0; i < count; ++i) {
        exact[i] += input[i];
        accounted[i] += residual[i];
      }
    }
    // Unbiased: a kept value is scaled by its stratum length (20), so the terms reach ~80.
    for (size_t i = 0; i < count; ++i) {
      ASSERT_NEAR(accounted[i], exact[i], 1e-4) << codec << " element " << i;
    }
  }
}

TEST(RandomK, RefusesMessagesThatCarryIndices) {
  // With its own seed per rank a message is indices then values; summing it as values would be
  // garbage, so every rank refuses it before sending anything.
  const int n = 3;
  CompressedRanks ranks(n, "randomk:ratio=0.05,shared_seed=false", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<std::string> errors;
  const std::vector<ncclResult_t> results = ranks.allreduce(
      randomk(), DType::kFloat32, 1000, fp32_inputs(n, 1000, 6), &outputs, 1.0, false, 0, &errors);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)], ncclInvalidUsage) << r;
    EXPECT_NE(errors[static_cast<size_t>(r)].find("shared_seed"), std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_EQ(ranks.counters(r).wire_bytes, 0u) << r;
  }
}

}  // namespace
}  // namespace terse
