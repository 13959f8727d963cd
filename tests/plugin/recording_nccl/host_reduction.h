// The recording stand-in's arithmetic: `acc = acc (op) in` element by element on host memory,
// for NCCL's integer and float types (half and bfloat16 through float). Ranks' contributions
// are combined in rank order; PreMulSum scales each input first.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <cstring>

namespace recording_nccl {

enum class Combine { kSum, kProd, kMax, kMin };

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  int exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | static_cast<uint32_t>(exponent + 112) << 23 | (mantissa & 0x3ff) << 13;
    }
  } else {
    bits = sign | static_cast<uint32_t>(exponent + 112) << 23 | mantissa << 13;
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Round to nearest even; enough for the test values (no NaN payloads).
inline uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  if (exponent >= 0x1f) return sign | 0x7c00;
  if (exponent <= 0) {
    if (exponent < -10) return sign;
    mantissa |= 0x800000;
    const int shift = 14 - exponent;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = static_cast<uint32_t>(exponent) << 10 | mantissa >> 13;
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

template <class T>
T combine(Combine how, T a, T b) {
  switch (how) {
    case Combine::kSum:
      return static_cast<T>(a + b);
    case Combine::kProd:
      return static_cast<T>(a * b);
    case Combine::kMax:
      return a > b ? a : b;
    case Combine::kMin:
      return a < b ? a : b;
  }
  return a;
}

template <class T>
void reduce_into(Combine how, double scale, bool first, const void* in, void* acc, size_t n) {
  const T* from = static_cast<const T*>(in);
  T* to = static_cast<T*>(acc);
  for (size_t i = 0; i < n; ++i) {
    const T value = scale == 1.0 ? from[i] : static_cast<T>(from[i] * scale);
    to[i] = first ? value : combine(how, to[i], value);
  }
}

// 16-bit floats through float: each step rounds back, as a reduction in that type would.
template <float (*load)(uint16_t), uint16_t (*store)(float)>
void reduce_16(Combine how, double scale, bool first, const void* in, void* acc, size_t n) {
  const uint16_t* from = static_cast<const uint16_t*>(in);
  uint16_t* to = static_cast<uint16_t*>(acc);
  for (size_t i = 0; i < n; ++i) {
    const float value = static_cast<float>(load(from[i]) * scale);
    to[i] = store(first ? value : combine(how, load(to[i]), value));
  }
}

// False for a type the stand-in does not reduce (fp8).
inline bool reduce(ncclDataType_t type, Combine how, double scale, bool first, const void* in,
                   void* acc, size_t n) {
  switch (type) {
    case ncclInt8:
      reduce_into<int8_t>(how, scale, first, in, acc, n);
      return true;
    case ncclUint8:
      reduce_into<uint8_t>(how, scale, first, in, acc, n);
      return true;
    case ncclInt32:
      reduce_into<int32_t>(how, scale, first, in, acc, n);
      return true;
    case ncclUint32:
      reduce_into<uint32_t>(how, scale, first, in, acc, n);
      return true;
    case ncclInt64:
      reduce_into<int64_t>(how, scale, first, in, acc, n);
      return true;
    case ncclUint64:
      reduce_into<uint64_t>(how, scale, first, in, acc, n);
      return true;
    case ncclFloat32:
      reduce_into<float>(how, scale, first, in, acc, n);
      return true;
    case ncclFloat64:
      reduce_into<double>(how, scale, first, in, acc, n);
      return true;
    case ncclFloat16:
      reduce_16<half_to_float, float_to_half>(how, scale, first, in, acc, n);
      return true;
    case ncclBfloat16:
      reduce_16<bf16_to_float, float_to_bf16>(how, scale, first, in, acc, n);
      return true;
    default:
      return false;
  }
}

// Divides every element by `divisor` (ncclAvg on integers: the sum divided, as NCCL does).
inline void divide(ncclDataType_t type, void* acc, size_t n, int divisor) {
  auto apply = [&](auto zero) {
    auto* values = static_cast<decltype(zero)*>(acc);
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<decltype(zero)>(values[i] / divisor);
  };
  switch (type) {
    case ncclInt8:
      return apply(int8_t{});
    case ncclUint8:
      return apply(uint8_t{});
    case ncclInt32:
      return apply(int32_t{});
    case ncclUint32:
      return apply(uint32_t{});
    case ncclInt64:
      return apply(int64_t{});
    case ncclUint64:
      return apply(uint64_t{});
    default:
      return;
  }
}

}  // namespace recording_nccl
