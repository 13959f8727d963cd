// Distributed PowerSGD (powersgd_allreduce.cpp) on 1, 2, 3, 4 and 8 ranks. Stated bound: the
// result is an orthogonal projection of the exact sum, so every element is within
// ||sum||_F <= S_sum = sum over ranks of ||g_r||_F (one lossy step in L2,
// compressed_error_bound.h); a sum of rank <= r comes back exact to fp32 rounding; the warm start
// makes a fixed gradient's error shrink; error feedback keeps the running sum on track.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "compressed_test_support.h"

namespace terse {
namespace {

using test::CompressedRanks;
using test::run_and_check;
using test::to_dtype;

const CompressedAlgorithmInfo& powersgd() {
  return *find_compressed_algorithm("powersgd");
}

class PowerSgdRanks : public ::testing::TestWithParam<int> {};

TEST_P(PowerSgdRanks, WithinTheProjectionBound) {
  CompressedRanks ranks(GetParam(), "powersgd:rank=4", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  // 1 and 1009 (prime) are planned dense (exact); 1001 = 7 x 143, 65536 = 256 x 256.
  for (size_t count : {size_t{1}, size_t{1001}, size_t{1009}, size_t{65536}}) {
    run_and_check(ranks, powersgd(), DType::kFloat32, count, count);
  }
  run_and_check(ranks, powersgd(), DType::kBFloat16, 4096, 3, 1.0 / GetParam());
  run_and_check(ranks, powersgd(), DType::kFloat32, 4096, 4, 1.0, true);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PowerSgdRanks, ::testing::Values(1, 2, 3, 4, 8));

// rows x cols = 64 x 64; rank r's gradient is (r + 1) u v^T + (r - 1) w z^T: the sum has rank 2.
std::vector<float> low_rank_gradient(int rank) {
  std::vector<float> g(64 * 64);
  for (size_t i = 0; i < 64; ++i) {
    for (size_t j = 0; j < 64; ++j) {
      const double u = std::sin(0.3 * i), v = std::cos(0.2 * j), w = std::cos(0.7 * i + 1),
                   z = std::sin(0.5 * j + 2);
      g[i * 64 + j] = static_cast<float>((rank + 1) * u * v + (rank - 1) * w * z);
    }
  }
  return g;
}

double max_error(const std::vector<uint8_t>& output, const std::vector<double>& exact) {
  const std::vector<double> got = test::from_dtype(output, DType::kFloat32, exact.size());
  double worst = 0;
  for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::fabs(got[i] - exact[i]));
  return worst;
}

TEST(PowerSgd, LowRankSumIsRecoveredExactly) {
  CompressedRanks ranks(4, "powersgd:rank=2", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<double> exact(64 * 64, 0.0);
  for (int r = 0; r < 4; ++r) {
    const std::vector<float> g = low_rank_gradient(r);
    for (size_t i = 0; i < g.size(); ++i) exact[i] += g[i];
    inputs.push_back(to_dtype(g, DType::kFloat32));
  }
  std::vector<std::vector<uint8_t>> outputs;
  const auto results = ranks.allreduce(powersgd(), DType::kFloat32, 64 * 64, inputs, &outputs);
  for (ncclResult_t result : results) ASSERT_EQ(result, ncclSuccess);
  EXPECT_LT(max_error(outputs[0], exact), 1e-3);  // values up to ~20
  for (int r = 1; r < 4; ++r) EXPECT_EQ(outputs[size_t(r)], outputs[0]);
}

// The exact fp32 sum of float inputs, as float64.
std::vector<double> exact_sum(const std::vector<std::vector<uint8_t>>& inputs, size_t count) {
  std::vector<double> exact(count, 0.0);
  for (const auto& input : inputs) {
    const std::vector<double> values = test::from_dtype(input, DType::kFloat32, count);
    for (size_t i = 0; i < count; ++i) exact[i] += values[i];
  }
  return exact;
}

// Tensors the plan makes dense (a handful of elements, a prime count: no useful matrix view) are
// summed exactly: fp32 arithmetic only, far inside the projection bound.
TEST(PowerSgd, NoAllocationOnceWarm) {
  // M lives in the residual's buffer and the factors in scratch: repeated calls grow nothing.
  CompressedRanks ranks(3, "powersgd:rank=4", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  test::expect_scratch_stops_growing(ranks, powersgd(), 128 * 96);
}

TEST(PowerSgd, DensePlanIsExact) {
  CompressedRanks ranks(3, "powersgd:rank=4", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  for (size_t count : {size_t{7}, size_t{1009}}) {
    std::vector<std::vector<uint8_t>> inputs;
    for (int r = 0; r < 3; ++r)
      inputs.push_back(to_dtype(test::make_rank_input(r, count, 5), DType::kFloat32));
    std::vector<std::vector<uint8_t>> outputs;
    const auto results = ranks.allreduce(powersgd(), DType::kFloat32, count, inputs, &outputs);
    for (ncclResult_t result : results) ASSERT_EQ(result, ncclSuccess);
    EXPECT_LT(max_error(outputs[0], exact_sum(inputs, count)), 1e-6);  // |values| < 4.5
    for (float residual : ranks.residual(0, count, DType::kFloat32)) EXPECT_EQ(residual, 0.0f);
  }
}

// An infinite input makes the factors non-finite on every rank alike: all fall back to the
// exact sum (the infinity where it was, every other element exact) and keep no residual.
TEST(PowerSgd, NonFiniteInputFallsBackToTheExactSum) {
  CompressedRanks ranks(2, "powersgd:rank=4", MemoryKind::kResidual);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  const size_t count = 64 * 64;
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> values = test::make_rank_input(r, count, 8);
    if (r == 1) values[100] = INFINITY;
    inputs.push_back(to_dtype(values, DType::kFloat32));
  }
  std::vector<std::vector<uint8_t>> outputs;
  const auto results = ranks.allreduce(powersgd(), DType::kFloat32, count, inputs, &outputs);
  for (ncclResult_t result : results) ASSERT_EQ(result, ncclSuccess);
  std::vector<double> exact = exact_sum(inputs, count);
  std::vector<double> got = test::from_dtype(outputs[0], DType::kFloat32, count);
  EXPECT_TRUE(std::isinf(got[100]) && got[100] > 0);
  exact[100] = got[100] = 0;
  double worst = 0;
  for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(got[i] - exact[i]));
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(outputs[1], outputs[0]);
  for (float residual : ranks.residual(0, count, DType::kFloat32)) ASSERT_EQ(residual, 0.0f);
}

// The same full-rank gradient every step.
std::vector<std::vector<uint8_t>> fixed_inputs(int nranks, std::vector<double>* exact) {
  std::vector<std::vector<uint8_t>> inputs;
  exact->assign(64 * 64, 0.0);
  for (int r = 0; r < nranks; ++r) {
    const std::vector<float> g = test::make_rank_input(r, 64 * 64, 99);
    for (size_t i = 0; i < g.size(); ++i) (*exact)[i] += g[i];
    inputs.push_back(to_dtype(g, DType::kFloat32));
  }
  return inputs;
}

double frobenius(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v * v;
  return std::sqrt(sum);
}

TEST(PowerSgd, WarmStartShrinksTheErrorOfAFixedGradient) {
  CompressedRanks ranks(2, "powersgd:rank=4", MemoryKind::kNone);
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  std::vector<double> exact;
  const auto inputs = fixed_inputs(2, &exact);
  std::vector<double> errors;
  for (uint64_t step = 0; step < 8; ++step) {
    std::vector<std::vector<uint8_t>> outputs;
    const auto results =
        ranks.allreduce(powersgd(), DType::kFloat32, 64 * 64, inputs, &outputs, 1.0, false, step);
    for (ncclResult_t result : results) ASSERT_EQ(result, ncclSuccess);
    const std::vector<double> got = test::from_dtype(outputs[0], DType::kFloat32, exact.size());
    std::vector<double> difference(exact.size());
    for (size_t i = 0; i < exact.size(); ++i) difference[i] = got[i] - exact[i];
    errors.push_back(frobenius(difference));
  }
  // Each warm step is one more subspace iteration toward the best rank-4 approximation.
  EXPECT_LT(errors.back(), errors.front());
  EXPECT_LT(errors.back(), frobenius(exact));
}

// Running sums over 200 steps of the same gradient: with error feedback the decoded running sum
// trails the true one only by the residuals in flight, a gap that stays bounded, so the relative
// gap falls like 1/t; without it the gap grows with t and the relative gap stays put.
double relative_gap_after(MemoryKind memory, int steps) {
  CompressedRanks ranks(2, "powersgd:rank=1", memory);
  EXPECT_TRUE(ranks.ok()) << ranks.error();
  std::vector<double> exact;
  const auto inputs = fixed_inputs(2, &exact);
  std::vector<double> running(exact.size(), 0.0);
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<uint8_t>> outputs;
    const auto results = ranks.allreduce(powersgd(), DType::kFloat32, 64 * 64, inputs, &outputs,
                                         1.0, false, static_cast<uint64_t>(step));
    for (ncclResult_t result : results) EXPECT_EQ(result, ncclSuccess);
    const std::vector<double> got = test::from_dtype(outputs[0], DType::kFloat32, exact.size());
    for (size_t i = 0; i < exact.size(); ++i) running[i] += got[i];
  }
  std::vector<double> gap(exact.size());
  for (size_t i = 0; i < exact.size(); ++i) gap[i] = running[i] - steps * exact[i];
  return frobenius(gap) / (steps * frobenius(exact));
}

TEST(PowerSgd, ErrorFeedbackKeepsTheRunningSumOnTrack) {
  const double early = relative_gap_after(MemoryKind::kResidual, 50);
  const double with_feedback = relative_gap_after(MemoryKind::kResidual, 200);
  const double without = relative_gap_after(MemoryKind::kNone, 200);
  std::printf("relative gap: feedback %.4f after 50 steps, %.4f after 200; none %.4f\n", early,
              with_feedback, without);
  // A bounded gap: four times the steps, at most a third of the relative gap (1/4 exactly when
  // the residual has settled).
  EXPECT_LT(with_feedback, early / 3);
  EXPECT_LT(with_feedback, 0.25 * without);
}

}  // namespace
}  // namespace terse
