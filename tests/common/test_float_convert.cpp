#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/float_convert.h"

namespace terse {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 ties between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  // Just above the midpoint rounds up.
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536), 0x3f81);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(Bf16, KeepsNanAndInfinity) {
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lives only in the low bits must not truncate to infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0x7f800001u)))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(Half, RoundTripsRepresentableValuesAndRoundsToNearestEven) {
  for (float value : {0.0f, -0.0f, 1.0f, -1.5f, 65504.0f, 6.103515625e-05f}) {
    EXPECT_EQ(half_to_float(float_to_half(value)), value);
  }
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
}

}  // namespace
}  // namespace terse
