#include <gtest/gtest.h>

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
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

// The model of one element of reduce_into / reduce_pair where the storage type is the computing
// type: the accumulator (`left`) is kept unless the operand wins the comparison, which decides
// the bits of max/min with NaNs and signed zeros.
template <typename T>
T model_pair(ReduceKind kind, T left, T right) {
  switch (kind) {
    case ReduceKind::kSum:
      return static_cast<T>(left + right);
    case ReduceKind::kProd:
      return static_cast<T>(left * right);
    case ReduceKind::kMax:
      return right > left ? right : left;
    case ReduceKind::kMin:
      return right < left ? right : left;
  }
  return left;
}

template <typename T>
std::vector<uint8_t> model_pair_bytes(ReduceKind kind, const std::vector<uint8_t>& left,
                                      const std::vector<uint8_t>& right) {
  std::vector<uint8_t> out(left.size());
  for (size_t at = 0; at + sizeof(T) <= left.size(); at += sizeof(T)) {
    T l, r;
    std::memcpy(&l, &left[at], sizeof(T));
    std::memcpy(&r, &right[at], sizeof(T));
    const T result = model_pair(kind, l, r);
    std::memcpy(&out[at], &result, sizeof(T));
  }
  return out;
}

// reduce_pair(out, left, right) computes left (kind) right for every type and kind, written to a
// third buffer or over either operand, the same bits as reduce_into with `left` as the
// accumulator; for the types whose storage is their arithmetic, the same bits as the model above.
// Random bytes cover NaNs, signed zeros, infinities and subnormals.
TEST(Reduction, PairIsLeftOpRightBitForBit) {
  const ncclDataType_t types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                  ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                  ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  constexpr size_t kCount = 301;
  for (ncclDataType_t type : types) {
    const size_t bytes = kCount * nccl_type_size(type);
    std::vector<uint8_t> left(bytes), right(bytes);
    uint32_t state = 12345;
    for (size_t i = 0; i < bytes; ++i) {
      state = state * 1103515245u + 12345u;
      left[i] = static_cast<uint8_t>(state >> 24);
      right[i] = static_cast<uint8_t>(state >> 16);
    }
    // Some equal pairs and zeros of both signs, where only the operand order decides.
    std::memcpy(&right[0], &left[0], nccl_type_size(type));
    for (ReduceKind kind :
         {ReduceKind::kSum, ReduceKind::kProd, ReduceKind::kMax, ReduceKind::kMin}) {
      const std::string what =
          std::string(nccl_type_name(type)) + " kind " + std::to_string(static_cast<int>(kind));
      std::vector<uint8_t> into = left;
      reduce_into(type, kind, into.data(), right.data(), kCount);
      std::vector<uint8_t> apart(bytes, 0), over_left = left, over_right = right;
      reduce_pair(type, kind, apart.data(), left.data(), right.data(), kCount);
      reduce_pair(type, kind, over_left.data(), over_left.data(), right.data(), kCount);
      reduce_pair(type, kind, over_right.data(), left.data(), over_right.data(), kCount);
      EXPECT_EQ(apart, into) << what;
      EXPECT_EQ(over_left, into) << what;
      EXPECT_EQ(over_right, into) << what;
      std::vector<uint8_t> model;
      if (type == ncclFloat32) model = model_pair_bytes<float>(kind, left, right);
      if (type == ncclFloat64) model = model_pair_bytes<double>(kind, left, right);
      if (type == ncclUint32) model = model_pair_bytes<uint32_t>(kind, left, right);
      if (type == ncclUint8) model = model_pair_bytes<uint8_t>(kind, left, right);
      if (!model.empty()) {
        EXPECT_EQ(apart, model) << what << " against the model";
      }
    }
  }
  // Signed zeros and NaN, spelled out: max(+0, -0) keeps the accumulator's +0, max(-0, +0) its
  // -0; a NaN operand never wins, a NaN accumulator stays.
  const float nan = std::nanf("");
  const std::vector<float> l = {0.0f, -0.0f, 1.0f, nan}, r = {-0.0f, 0.0f, nan, 1.0f};
  std::vector<float> out(4);
  reduce_pair(ncclFloat32, ReduceKind::kMax, out.data(), l.data(), r.data(), 4);
  EXPECT_FALSE(std::signbit(out[0]));
  EXPECT_TRUE(std::signbit(out[1]));
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_TRUE(std::isnan(out[3]));
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
