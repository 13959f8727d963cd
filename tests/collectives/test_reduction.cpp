#include <gtest/gtest.h>

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/reduction.h"
#include "common/float_convert.h"

namespace terse {
namespace {

TEST(Reduction, IntegerSumProdMaxMinMatchPlainArithmetic) {
  std::vector<int32_t> a = {1, -2, 3, 1000000, -7}, b = {4, 5, -6, 3, -7};
  auto run = [&](ReduceKind kind) {
    std::vector<int32_t> out = a;
    reduce_into(ncclInt32, kind, out.data(), b.data(), a.size());
    return out;
  };
  EXPECT_EQ(run(ReduceKind::kSum), (std::vector<int32_t>{5, 3, -3, 1000003, -14}));
  EXPECT_EQ(run(ReduceKind::kProd), (std::vector<int32_t>{4, -10, -18, 3000000, 49}));
  EXPECT_EQ(run(ReduceKind::kMax), (std::vector<int32_t>{4, 5, 3, 1000000, -7}));
  EXPECT_EQ(run(ReduceKind::kMin), (std::vector<int32_t>{1, -2, -6, 3, -7}));
}

TEST(Reduction, UnsignedWrapsAndInt64KeepsFullWidth) {
  std::vector<uint8_t> a = {250, 3}, b = {10, 4};
  reduce_into(ncclUint8, ReduceKind::kSum, a.data(), b.data(), 2);
  EXPECT_EQ(a, (std::vector<uint8_t>{4, 7}));
  std::vector<int64_t> c = {1ll << 40}, d = {1ll << 41};
  reduce_into(ncclInt64, ReduceKind::kSum, c.data(), d.data(), 1);
  EXPECT_EQ(c[0], (1ll << 40) + (1ll << 41));
}

TEST(Reduction, Bf16AddsInFp32AndRoundsOnce) {
  // 256 + 1 is not representable in bf16 (8 significant bits): rounds to even, 256.
  std::vector<uint16_t> a = {float_to_bf16(256.0f), float_to_bf16(1.5f)};
  std::vector<uint16_t> b = {float_to_bf16(1.0f), float_to_bf16(2.25f)};
  reduce_into(ncclBfloat16, ReduceKind::kSum, a.data(), b.data(), 2);
  EXPECT_EQ(bf16_to_float(a[0]), 256.0f);
  EXPECT_EQ(bf16_to_float(a[1]), 3.75f);
}

TEST(Reduction, HalfMaxAndMin) {
  std::vector<uint16_t> a = {float_to_half(-1.0f), float_to_half(2.0f)};
  std::vector<uint16_t> b = {float_to_half(0.5f), float_to_half(-3.0f)};
  std::vector<uint16_t> high = a, low = a;
  reduce_into(ncclFloat16, ReduceKind::kMax, high.data(), b.data(), 2);
  reduce_into(ncclFloat16, ReduceKind::kMin, low.data(), b.data(), 2);
  EXPECT_EQ(half_to_float(high[0]), 0.5f);
  EXPECT_EQ(half_to_float(high[1]), 2.0f);
  EXPECT_EQ(half_to_float(low[0]), -1.0f);
  EXPECT_EQ(half_to_float(low[1]), -3.0f);
}

TEST(Reduction, Fp8SaturatesToTheLargestFiniteValue) {
  // e4m3's largest finite value is 448; 448 + 448 saturates instead of becoming NaN.
  uint8_t big = __nv_cvt_float_to_fp8(448.0f, __NV_SATFINITE, __NV_E4M3);
  std::vector<uint8_t> a = {big}, b = {big};
  reduce_into(ncclFloat8e4m3, ReduceKind::kSum, a.data(), b.data(), 1);
  EXPECT_EQ(a[0], big);
  // e5m2: 1.0 + 0.25 is exactly representable (2 mantissa bits).
  uint8_t one = __nv_cvt_float_to_fp8(1.0f, __NV_SATFINITE, __NV_E5M2);
  uint8_t quarter = __nv_cvt_float_to_fp8(0.25f, __NV_SATFINITE, __NV_E5M2);
  std::vector<uint8_t> c = {one}, d = {quarter};
  reduce_into(ncclFloat8e5m2, ReduceKind::kSum, c.data(), d.data(), 1);
  EXPECT_EQ(c[0], __nv_cvt_float_to_fp8(1.25f, __NV_SATFINITE, __NV_E5M2));
}

TEST(Reduction, ScaleAndDivide) {
  std::vector<double> x = {2.0, -4.0}, y(2);
  scale_elements(ncclFloat64, y.data(), x.data(), 2, 0.25);
  EXPECT_EQ(y, (std::vector<double>{0.5, -1.0}));
  std::vector<int32_t> i = {7, -7}, j(2);
  divide_elements(ncclInt32, j.data(), i.data(), 2, 2);
  EXPECT_EQ(j, (std::vector<int32_t>{3, -3}));
}

TEST(Reduction, TypeSizesAndNames) {
  EXPECT_EQ(nccl_type_size(ncclFloat8e5m2), 1u);
  EXPECT_EQ(nccl_type_size(ncclBfloat16), 2u);
  EXPECT_EQ(nccl_type_size(ncclUint64), 8u);
  EXPECT_EQ(nccl_type_size(static_cast<ncclDataType_t>(99)), 0u);
  EXPECT_STREQ(nccl_type_name(ncclFloat32), "float");
  EXPECT_TRUE(nccl_type_is_float(ncclFloat8e4m3));
  EXPECT_FALSE(nccl_type_is_float(ncclInt64));
}

}  // namespace
}  // namespace terse
