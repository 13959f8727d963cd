// The compression columns' arithmetic (perf/nccl_tests/compression_figures.h): the stated bound
// S_sum ((1 + c)^k - 1) plus its fp32 and output-rounding slack, S_sum from the value pattern,
// the count of elements outside a bound and the largest relative error, and the traffic figures
// from two statistics snapshots. Each test derives its expected figure by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "perf/nccl_tests/compression_figures.h"

namespace terse {
namespace perf {
namespace {

const DataTypeInfo& float_type() {
  return *find_data_type("float");
}

TEST(PerfCompressionBound, LossyGrowthPlusFp32Slack) {
  // int8 minmax nearest through sra: c = 1/255 + 2^-20, k = 2, S_sum = 4 ranks x 100.
  StatedBound stated;
  stated.factor = 1.0 / 255 + std::ldexp(1.0, -20);
  stated.steps = 2;
  const double grown = (1 + stated.factor) * (1 + stated.factor);
  const double expected = 400 * (grown - 1) + 64 * std::ldexp(1.0, -24) * 400 * grown;
  EXPECT_DOUBLE_EQ(allreduce_bound(stated, 400, 1.0, std::ldexp(1.0, -24), 400), expected);
  // Roughly 2 c S_sum: about 3.1, far below the result's size and far above fp32 rounding.
  EXPECT_NEAR(allreduce_bound(stated, 400, 1.0, std::ldexp(1.0, -24), 400), 3.14, 0.01);
}

TEST(PerfCompressionBound, StepsCompound) {
  // c = 1 (top-k) over a 3-step ring: (1 + 1)^3 - 1 = 7 times S_sum, plus 64 * 2^-24 * 8 S_sum.
  StatedBound stated;
  stated.factor = 1;
  stated.steps = 3;
  EXPECT_DOUBLE_EQ(allreduce_bound(stated, 10, 1.0, 0, 0), 70 + 64 * std::ldexp(1.0, -24) * 80);
}

TEST(PerfCompressionBound, UncompressedAllowsOnlyArithmetic) {
  StatedBound stated;  // factor 0, no lossy step
  EXPECT_DOUBLE_EQ(allreduce_bound(stated, 1024, 1.0, std::ldexp(1.0, -24), 1024),
                   64 * std::ldexp(1.0, -24) * 1024);
}

TEST(PerfCompressionBound, AverageScalesAndSixteenBitOutputRoundsOnce) {
  StatedBound stated;
  stated.factor = 0.5;
  stated.steps = 2;  // (1.5^2 - 1) = 1.25
  const double slack = 64 * std::ldexp(1.0, -24) * 8 * 2.25;
  const double scaled = (8 * 1.25 + slack) / 4;  // avg over 4 ranks
  // fp32 output: no rounding term (its unit roundoff is inside the slack).
  EXPECT_DOUBLE_EQ(allreduce_bound(stated, 8, 0.25, std::ldexp(1.0, -24), 6), scaled);
  // bf16 output: one more rounding of a value up to max_reference + the error.
  EXPECT_DOUBLE_EQ(allreduce_bound(stated, 8, 0.25, std::ldexp(1.0, -8), 6),
                   scaled + std::ldexp(1.0, -8) * (6 + scaled));
  // A negative scale is a magnitude like any other.
  EXPECT_DOUBLE_EQ(allreduce_bound(stated, 8, -0.25, std::ldexp(1.0, -24), 6), scaled);
}

TEST(PerfCompressionBound, NormSumOverEveryRanksInputs) {
  const ValuePattern pattern(float_type(), Reduction::kSum, 3, /*scrambled=*/true);
  const size_t count = 500;
  double max_sum = 0, l2_sum = 0;
  for (int rank = 0; rank < 3; ++rank) {
    double largest = 0, squares = 0;
    for (size_t i = 0; i < count; ++i) {
      const double value = pattern.input(rank, i);
      largest = std::max(largest, std::fabs(value));
      squares += value * value;
    }
    max_sum += largest;
    l2_sum += std::sqrt(squares);
  }
  EXPECT_DOUBLE_EQ(input_norm_sum(pattern, count, false), max_sum);
  EXPECT_DOUBLE_EQ(input_norm_sum(pattern, count, true), l2_sum);
  // Scrambled inputs spread over [-magnitude, magnitude]: the largest is near the magnitude, and
  // the L2 norm near magnitude sqrt(count / 3) (a uniform spread), not a degenerate constant.
  EXPECT_LE(max_sum, 3 * pattern.magnitude());
  EXPECT_GE(max_sum, 3 * 0.9 * pattern.magnitude());
  const double uniform_l2 = 3 * pattern.magnitude() * std::sqrt(count / 3.0);
  EXPECT_NEAR(l2_sum, uniform_l2, 0.1 * uniform_l2);
}

// The reference of a 4-rank fp32 sum, as floats.
std::vector<float> reference(const ValuePattern& pattern, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(pattern.reduced(i).value);
  return values;
}

TEST(PerfCompressionBound, CountsOnlyElementsOutsideTheBound) {
  const ValuePattern pattern(float_type(), Reduction::kSum, 4, /*scrambled=*/true);
  const size_t count = 1000;
  std::vector<float> result = reference(pattern, count);
  double largest = 0;
  for (float value : result) largest = std::max(largest, std::fabs(double(value)));
  double rel_err = -1;
  EXPECT_EQ(count_outside_bound(ncclFloat32, result.data(), count, pattern, 0, &rel_err), 0);
  EXPECT_EQ(rel_err, 0);

  // Bound 100: an error of 50 is inside, of 150 and of 101 outside, a NaN always outside.
  result[3] += 50;
  result[10] -= 150;
  result[20] += 101;
  EXPECT_EQ(count_outside_bound(ncclFloat32, result.data(), count, pattern, 100, &rel_err), 2);
  EXPECT_DOUBLE_EQ(rel_err, 150 / largest);
  result[30] = std::nanf("");
  EXPECT_EQ(count_outside_bound(ncclFloat32, result.data(), count, pattern, 100, &rel_err), 3);
  EXPECT_DOUBLE_EQ(rel_err, 150 / largest);  // the NaN counts as wrong, not as the largest error
}

TEST(PerfCompressionFigures, RatioAndTimesPerCallFromTwoSnapshots) {
  terseStats before{}, after{};
  before.wire_bytes = 1000;
  before.dense_wire_bytes = 4000;
  before.encode_seconds = 1.0;
  before.decode_seconds = 2.0;
  after.wire_bytes = 1000 + 3 * 260;
  after.dense_wire_bytes = 4000 + 3 * 1000;
  after.encode_seconds = 1.0 + 3 * 0.002;
  after.decode_seconds = 2.0 + 3 * 0.001;
  std::strcpy(after.last_codec, "topk:ratio=0.01,memory=host");
  const CompressionFigures figures = compression_figures(before, after, 3);
  EXPECT_EQ(figures.codec, "topk");  // the name, without the spelled-out parameters
  EXPECT_DOUBLE_EQ(figures.ratio, 0.26);
  EXPECT_NEAR(figures.encode_us, 2000, 1e-6);
  EXPECT_NEAR(figures.decode_us, 1000, 1e-6);
  // No traffic at all (a single rank): ratio 1, not a division by zero.
  EXPECT_DOUBLE_EQ(compression_figures(after, after, 3).ratio, 1.0);
}

TEST(PerfCompressionFigures, ColumnsLineUpWithTheHeader) {
  EXPECT_EQ(compression_columns("int8", 0.2583, 3.89e-3), "       int8  0.2583  3.89e-03");
}

}  // namespace
}  // namespace perf
}  // namespace terse
