#include "reduction_reference.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/float_convert.h"

namespace terse {
namespace test {
namespace {

constexpr double kPreMulSumFloatScalar = 0.75;
constexpr double kPreMulSumIntegerScalar = 2;

bool is_unsigned(ncclDataType_t type) {
  return type == ncclUint8 || type == ncclUint32 || type == ncclUint64;
}
bool is_fp8(ncclDataType_t type) {
  return type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

// A well-mixed 32-bit hash of (rank, index), so that neighbouring elements and ranks differ.
uint32_t mix(int rank, size_t index) {
  uint64_t x =
      index * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}

// Unit roundoff and half the smallest subnormal of a float type.
void rounding_of(ncclDataType_t type, double* unit, double* tiny) {
  switch (type) {
    case ncclFloat64:
      *unit = std::ldexp(1.0, -53), *tiny = std::ldexp(1.0, -1075);
      return;
    case ncclFloat32:
      *unit = std::ldexp(1.0, -24), *tiny = std::ldexp(1.0, -150);
      return;
    case ncclFloat16:
      *unit = std::ldexp(1.0, -11), *tiny = std::ldexp(1.0, -25);
      return;
    case ncclBfloat16:
      *unit = std::ldexp(1.0, -8), *tiny = std::ldexp(1.0, -134);
      return;
    case ncclFloat8e4m3:
      *unit = std::ldexp(1.0, -4), *tiny = std::ldexp(1.0, -10);
      return;
    case ncclFloat8e5m2:
      *unit = std::ldexp(1.0, -3), *tiny = std::ldexp(1.0, -17);
      return;
    default:
      *unit = 0, *tiny = 0;
  }
}

}  // namespace

const char* test_op_name(TestOp op) {
  switch (op) {
    case TestOp::kSum:
      return "sum";
    case TestOp::kProd:
      return "prod";
    case TestOp::kMax:
      return "max";
    case TestOp::kMin:
      return "min";
    case TestOp::kAvg:
      return "avg";
    case TestOp::kPreMulSum:
      return "premulsum";
  }
  return "?";
}

const std::vector<ncclDataType_t>& all_types() {
  static const std::vector<ncclDataType_t> types = {
      ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
      ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return types;
}

const std::vector<TestOp>& all_ops() {
  static const std::vector<TestOp> ops = {TestOp::kSum, TestOp::kProd, TestOp::kMax,
                                          TestOp::kMin, TestOp::kAvg,  TestOp::kPreMulSum};
  return ops;
}

ReduceOp make_reduce_op(TestOp op, ncclDataType_t type, int nranks) {
  ReduceOp result;
  switch (op) {
    case TestOp::kSum:
      break;
    case TestOp::kProd:
      result.kind = ReduceKind::kProd;
      break;
    case TestOp::kMax:
      result.kind = ReduceKind::kMax;
      break;
    case TestOp::kMin:
      result.kind = ReduceKind::kMin;
      break;
    case TestOp::kAvg:
      if (nccl_type_is_float(type)) {
        result.scale_input = true;
        result.input_scale = 1.0 / nranks;
      } else {
        result.divide_result = true;
        result.result_divisor = nranks;
      }
      break;
    case TestOp::kPreMulSum:
      result.scale_input = true;
      result.input_scale =
          nccl_type_is_float(type) ? kPreMulSumFloatScalar : kPreMulSumIntegerScalar;
      break;
  }
  return result;
}

double input_value(ncclDataType_t type, TestOp op, int rank, size_t index) {
  const uint32_t h = mix(rank, index);
  if (op == TestOp::kProd) {
    // Powers of two with signs: every partial product is exact in every type. Only ranks 0..2
    // contribute factors other than +-1, so products stay within int8 at any rank count.
    double magnitude = 1;
    if (rank < 3 && h % 3 == 0) magnitude = 2;
    if (rank < 3 && h % 3 == 1 && nccl_type_is_float(type)) magnitude = 0.5;
    const bool negative = !is_unsigned(type) && (h >> 8) % 4 == 0;
    return negative ? -magnitude : magnitude;
  }
  // -7..7 (0..14 unsigned): sums of 8 ranks times 2 (PreMulSum) still fit int8 and uint8.
  const int k = static_cast<int>(h % 15) - (is_unsigned(type) ? 0 : 7);
  if (!nccl_type_is_float(type)) return k;
  // Halves are exact in fp8; thirds make the wider floats round on every addition.
  if (is_fp8(type)) return k * 0.5;
  uint64_t element = 0;
  store_element(type, &element, 0, k / 3.0);
  return load_element(type, &element, 0);
}

double load_element(ncclDataType_t type, const void* data, size_t index) {
  switch (type) {
    case ncclInt8:
      return static_cast<const int8_t*>(data)[index];
    case ncclUint8:
      return static_cast<const uint8_t*>(data)[index];
    case ncclInt32:
      return static_cast<const int32_t*>(data)[index];
    case ncclUint32:
      return static_cast<const uint32_t*>(data)[index];
    case ncclInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[index]);
    case ncclUint64:
      return static_cast<double>(static_cast<const uint64_t*>(data)[index]);
    case ncclFloat16:
      return half_to_float(static_cast<const uint16_t*>(data)[index]);
    case ncclFloat32:
      return static_cast<const float*>(data)[index];
    case ncclFloat64:
      return static_cast<const double*>(data)[index];
    case ncclBfloat16:
      return bf16_to_float(static_cast<const uint16_t*>(data)[index]);
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
      __half_raw half = __nv_cvt_fp8_to_halfraw(static_cast<const uint8_t*>(data)[index],
                                                type == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2);
      return half_to_float(half.x);
    }
    default:
      return 0;
  }
}

void store_element(ncclDataType_t type, void* data, size_t index, double value) {
  switch (type) {
    case ncclInt8:
      static_cast<int8_t*>(data)[index] = static_cast<int8_t>(value);
      return;
    case ncclUint8:
      static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(value);
      return;
    case ncclInt32:
      static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value);
      return;
    case ncclUint32:
      static_cast<uint32_t*>(data)[index] = static_cast<uint32_t>(value);
      return;
    case ncclInt64:
      static_cast<int64_t*>(data)[index] = static_cast<int64_t>(value);
      return;
    case ncclUint64:
      static_cast<uint64_t*>(data)[index] = static_cast<uint64_t>(value);
      return;
    case ncclFloat16:
      static_cast<uint16_t*>(data)[index] = float_to_half(static_cast<float>(value));
      return;
    case ncclFloat32:
      static_cast<float*>(data)[index] = static_cast<float>(value);
      return;
    case ncclFloat64:
      static_cast<double*>(data)[index] = value;
      return;
    case ncclBfloat16:
      static_cast<uint16_t*>(data)[index] = float_to_bf16(static_cast<float>(value));
      return;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      static_cast<uint8_t*>(data)[index] = __nv_cvt_double_to_fp8(
          value, __NV_SATFINITE, type == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2);
      return;
    default:
      return;
  }
}

Reference make_reference(ncclDataType_t type, TestOp op, int nranks, size_t count) {
  Reference reference;
  reference.value.resize(count);
  reference.tolerance.assign(count, 0.0);
  const ReduceOp reduce_op = make_reduce_op(op, type, nranks);
  const bool is_float = nccl_type_is_float(type);
  double unit = 0, tiny = 0;
  rounding_of(type, &unit, &tiny);
  const double relative_bound = nranks * unit * std::pow(1 + unit, nranks);
  for (size_t i = 0; i < count; ++i) {
    double result = 0, magnitude = 0;
    for (int rank = 0; rank < nranks; ++rank) {
      double x = input_value(type, op, rank, i);
      if (reduce_op.scale_input) x *= reduce_op.input_scale;
      magnitude += std::fabs(x);
      if (rank == 0) {
        result = x;
      } else if (op == TestOp::kProd) {
        result *= x;
      } else if (op == TestOp::kMax) {
        result = std::max(result, x);
      } else if (op == TestOp::kMin) {
        result = std::min(result, x);
      } else {
        result += x;
      }
    }
    // Sums of small integers are exact in double; the quotient truncates as C does.
    if (reduce_op.divide_result) result = std::trunc(result / reduce_op.result_divisor);
    reference.value[i] = result;
    const bool rounds = is_float && op != TestOp::kMax && op != TestOp::kMin && op != TestOp::kProd;
    if (rounds) {
      reference.tolerance[i] = relative_bound * magnitude + 2 * nranks * tiny;
    }
  }
  return reference;
}

}  // namespace test
}  // namespace terse
