// PowerSGD's column math (orthogonalize.h): the fixed-order dot product, the Gram-Schmidt's
// orthonormality and its robustness to what gradients bring (zero, NaN, Inf, huge, tiny and
// dependent columns), and the normalisation of the warm-start Q.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "codec_test_support.h"
#include "codecs/orthogonalize.h"

namespace terse::testing {
namespace {

uint32_t bits_of(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// The order orthogonalize.h defines, written out plainly: 32 sequential lane sums, then the tree.
float reference_dot(const float* x, const float* y, size_t length) {
  float lanes[32] = {};
  for (size_t i = 0; i < length; ++i) {
    float product = x[i] * y[i];
    lanes[i % 32] = lanes[i % 32] + product;
  }
  for (int stride = 16; stride > 0; stride /= 2) {
    for (int lane = 0; lane < stride; ++lane) lanes[lane] = lanes[lane] + lanes[lane + stride];
  }
  return lanes[0];
}

double dot_double(const float* x, const float* y, size_t length) {
  double sum = 0;
  for (size_t i = 0; i < length; ++i) sum += double(x[i]) * y[i];
  return sum;
}

// Largest |<q_a, q_b> - delta_ab| over the first `count` columns, in double.
double orthonormality_defect(const std::vector<float>& columns, size_t length, int count) {
  double worst = 0;
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b <= a; ++b) {
      double d = dot_double(&columns[a * length], &columns[b * length], length);
      worst = std::max(worst, std::fabs(d - (a == b ? 1.0 : 0.0)));
    }
  }
  return worst;
}

bool all_finite(const std::vector<float>& values) {
  for (float v : values)
    if (!std::isfinite(v)) return false;
  return true;
}

TEST(FixedOrderDot, FollowsTheDefinedOrderBitForBit) {
  for (size_t length : {0, 1, 5, 31, 32, 33, 64, 1000, 4099}) {
    auto x = random_normal(length, 1 + length);
    auto y = random_normal(length, 2 + length);
    EXPECT_EQ(bits_of(fixed_order_dot(x.data(), y.data(), length)),
              bits_of(reference_dot(x.data(), y.data(), length)))
        << length;
  }
}

TEST(ColumnMaxAbsBits, IsTheLargestMagnitudeAndFlagsNanAndInf) {
  std::vector<float> x = {1.0f, -3.5f, 2.0f, 0.0f};
  EXPECT_EQ(column_max_abs_bits(x.data(), x.size()), bits_of(3.5f));
  x[2] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(abs_bits_finite(column_max_abs_bits(x.data(), x.size())));
  x[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(abs_bits_finite(column_max_abs_bits(x.data(), x.size())));
}

TEST(ColumnScale, BringsTheLargestEntryIntoOneToTwoExactly) {
  for (float max : {1e-30f, 3e-5f, 1.0f, 1.5f, 7.0f, 1e30f, 3e38f, 1e-40f}) {
    float scale = column_scale(abs_bits(max));
    float scaled = max * scale;
    if (max >= 1.7e38f) {
      EXPECT_GE(scaled, 2.0f);  // clamped for the top binade
      EXPECT_LT(scaled, 4.0f);
    } else if (max >= 1.2e-38f) {
      EXPECT_GE(scaled, 1.0f) << max;
      EXPECT_LT(scaled, 2.0f) << max;
      EXPECT_EQ(scaled / scale, max) << "power-of-two scaling is exact";
    } else {
      EXPECT_LT(scaled, 2.0f);  // subnormal maxima: no overflow, just smaller
      EXPECT_GT(scaled, 0.0f);
    }
  }
}

TEST(OrthogonalizeColumns, GivesOrthonormalColumnsSpanningTheInput) {
  const size_t length = 500;
  const int count = 8;
  auto columns = random_normal(length * count, 3);
  auto original = columns;
  orthogonalize_columns(columns.data(), length, count);
  // fp32 dot products of length 500 carry ~sqrt(500) * 2^-24 relative error.
  EXPECT_LE(orthonormality_defect(columns, length, count), 1e-5);
  // Gram-Schmidt keeps the nested spans: column 0 is the first input column, normalised;
  // column 1 lies in span(input 0, input 1).
  double norm0 = std::sqrt(dot_double(&original[0], &original[0], length));
  for (size_t i = 0; i < length; ++i) ASSERT_NEAR(columns[i], original[i] / norm0, 1e-6);
  double along0 = dot_double(&columns[length], &original[0], length);
  EXPECT_LE(std::fabs(along0), 1e-4);
}

TEST(OrthogonalizeColumns, SurvivesZeroNanInfHugeTinyAndDependentColumns) {
  const size_t length = 300;
  const int count = 9;
  auto columns = random_normal(length * count, 4);
  auto column = [&](int c) { return &columns[c * length]; };
  for (size_t i = 0; i < length; ++i) {
    column(1)[i] = 0.0f;                                // all zero
    column(3)[i] = 2.0f * column(0)[i];                 // dependent on column 0
    column(4)[i] *= 1e30f;                              // huge: squares overflow unscaled
    column(5)[i] *= 1e-41f;                             // subnormal: squares underflow unscaled
    column(8)[i] = column(0)[i] - 0.5f * column(6)[i];  // dependent on columns 0 and 6
  }
  column(2)[17] = std::numeric_limits<float>::quiet_NaN();
  column(7)[3] = std::numeric_limits<float>::infinity();
  orthogonalize_columns(columns.data(), length, count);
  ASSERT_TRUE(all_finite(columns));
  EXPECT_LE(orthonormality_defect(columns, length, count), 1e-5);
}

TEST(OrthogonalizeColumns, MoreColumnsThanLengthStayFiniteAndTheExtraOnesVanish) {
  const size_t length = 3;
  const int count = 5;
  auto columns = random_normal(length * count, 5);
  orthogonalize_columns(columns.data(), length, count);
  ASSERT_TRUE(all_finite(columns));
  EXPECT_LE(orthonormality_defect(columns, length, 3), 1e-6);
  // Columns 3 and 4 cannot be orthogonal to a basis of R^3: they collapse, and become zero.
  for (size_t i = 3 * length; i < columns.size(); ++i) EXPECT_EQ(columns[i], 0.0f) << i;
}

TEST(NormalizeColumns, GivesUnitColumnsAndReplacesDegenerateOnes) {
  const size_t length = 200;
  const int count = 4;
  auto columns = random_normal(length * count, 6);
  auto original = columns;
  for (size_t i = 0; i < length; ++i) columns[length + i] = 0.0f;
  columns[2 * length + 9] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < length; ++i) columns[3 * length + i] *= 1e35f;
  normalize_columns(columns.data(), length, count, 77);
  ASSERT_TRUE(all_finite(columns));
  for (int c = 0; c < count; ++c) {
    EXPECT_NEAR(dot_double(&columns[c * length], &columns[c * length], length), 1.0, 1e-6) << c;
  }
  // Healthy columns keep their direction.
  double norm0 = std::sqrt(dot_double(&original[0], &original[0], length));
  for (size_t i = 0; i < length; ++i) ASSERT_NEAR(columns[i], original[i] / norm0, 1e-6);
  double norm3 = std::sqrt(dot_double(&original[3 * length], &original[3 * length], length));
  for (size_t i = 0; i < length; ++i) {
    ASSERT_NEAR(columns[3 * length + i], original[3 * length + i] / norm3, 1e-6);
  }
}

}  // namespace
}  // namespace terse::testing
