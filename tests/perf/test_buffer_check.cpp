// #wrong: elements outside their expectation are counted, one by one, in every datatype.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "perf/nccl_tests/buffer_check.h"
#include "perf/nccl_tests/element_values.h"

namespace terse {
namespace perf {
namespace {

TEST(PerfBufferCheck, ACorrectBufferHasNoWrongElement) {
  for (const DataTypeInfo& type : data_types()) {
    const ValuePattern pattern(type, Reduction::kSum, 4);
    std::vector<char> data(257 * type.bytes);
    fill_buffer(type.type, data.data(), 257, [&](size_t i) { return pattern.reduced(i).value; });
    EXPECT_EQ(
        count_wrong(type.type, data.data(), 257, [&](size_t i) { return pattern.reduced(i); }), 0)
        << type.name;
  }
}

TEST(PerfBufferCheck, OneWrongElementCountsOne) {
  for (const DataTypeInfo& type : data_types()) {
    const ValuePattern pattern(type, Reduction::kSum, 3);
    std::vector<char> data(100 * type.bytes);
    fill_buffer(type.type, data.data(), 100, [&](size_t i) { return pattern.reduced(i).value; });
    // Off by one: far outside any tolerance of these small values.
    store_element(type.type, data.data(), 42, pattern.reduced(42).value + 1);
    EXPECT_EQ(
        count_wrong(type.type, data.data(), 100, [&](size_t i) { return pattern.reduced(i); }), 1)
        << type.name;
  }
}

TEST(PerfBufferCheck, ToleranceIsInclusiveAndNaNIsWrong) {
  EXPECT_TRUE(matches(3.0, {3.0, 0.0}));
  EXPECT_FALSE(matches(3.0000001, {3.0, 0.0}));
  EXPECT_TRUE(matches(3.25, {3.0, 0.25}));
  EXPECT_FALSE(matches(3.2500001, {3.0, 0.25}));
  EXPECT_FALSE(matches(std::numeric_limits<double>::quiet_NaN(), {3.0, 1.0}));

  std::vector<float> data = {1.0f, 2.0f, std::nanf(""), 4.5f};
  EXPECT_EQ(count_wrong(ncclFloat32, data.data(), data.size(),
                        [](size_t i) {
                          return Expectation{static_cast<double>(i + 1), 0.25};
                        }),
            2);  // the NaN and 4.5 vs 4
}

TEST(PerfBufferCheck, NarrowFloatsRoundTrip) {
  uint16_t half = 0;
  store_element(ncclFloat16, &half, 0, 2049);  // not exact in half: rounds to even, 2048
  EXPECT_EQ(load_element(ncclFloat16, &half, 0), 2048);
  uint8_t fp8 = 0;
  store_element(ncclFloat8e4m3, &fp8, 0, 1000);  // saturates to the largest finite value
  EXPECT_EQ(load_element(ncclFloat8e4m3, &fp8, 0), 448);
  store_element(ncclFloat8e5m2, &fp8, 0, -6);
  EXPECT_EQ(load_element(ncclFloat8e5m2, &fp8, 0), -6);
  uint16_t bf16 = 0;
  store_element(ncclBfloat16, &bf16, 0, 257);  // 8 bits of precision
  EXPECT_EQ(load_element(ncclBfloat16, &bf16, 0), 256);
}

}  // namespace
}  // namespace perf
}  // namespace terse
