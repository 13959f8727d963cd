// The element types codecs accept. Codecs compute in fp32 whatever the input type, and decode
// into any of them (the wire keeps the encoder's type only for information). fp8 is NCCL 2.28's
// ncclFloat8e4m3 and ncclFloat8e5m2 (OCP's E4M3 and E5M2, codecs/minifloat.h).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/minifloat.h"
#include "common/float_convert.h"
#include "common/host_device.h"

namespace terse {

enum class DType : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat8E4M3 = 3,
  kFloat8E5M2 = 4
};

constexpr int kDTypeCount = 5;

TERSE_HD size_t dtype_size(DType dtype) {
  return dtype == DType::kFloat32
             ? 4
             : (dtype == DType::kFloat8E4M3 || dtype == DType::kFloat8E5M2 ? 1 : 2);
}

const char* dtype_name(DType dtype);

// Maps NCCL's type; false for types no codec handles (integers, fp64).
bool dtype_from_nccl(ncclDataType_t type, DType* dtype);

// Element `i` of a tensor of `dtype`, as fp32.
TERSE_HD float load_element(const void* data, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kFloat16:
      return half_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kBFloat16:
      return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kFloat8E4M3:
      return fp8_to_float<E4M3>(static_cast<const uint8_t*>(data)[i]);
    case DType::kFloat8E5M2:
      return fp8_to_float<E5M2>(static_cast<const uint8_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Stores fp32 `value` as element `i` (rounded to nearest even for 16-bit and fp8 types; fp8
// saturates finite values at its max normal).
TERSE_HD void store_element(void* data, DType dtype, size_t i, float value) {
  switch (dtype) {
    case DType::kFloat16:
      static_cast<uint16_t*>(data)[i] = float_to_half(value);
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = float_to_bf16(value);
      break;
    case DType::kFloat8E4M3:
      static_cast<uint8_t*>(data)[i] = float_to_fp8<E4M3>(value);
      break;
    case DType::kFloat8E5M2:
      static_cast<uint8_t*>(data)[i] = float_to_fp8<E5M2>(value);
      break;
    default:
      static_cast<float*>(data)[i] = value;
  }
}

// Typed views for hot loops that are templated on the element type. Forced inline on the host
// (TERSE_CONVERT_HD, float_convert.h): out of line, F16::store ran once per element in the
// baseline ISA and fp16 encode fell to 1 GB/s.
struct F32 {
  using Storage = float;
  static constexpr DType kType = DType::kFloat32;
  TERSE_CONVERT_HD static float load(float v) { return v; }
  TERSE_CONVERT_HD static float store(float v) { return v; }
};
struct F16 {
  using Storage = uint16_t;
  static constexpr DType kType = DType::kFloat16;
  TERSE_CONVERT_HD static float load(uint16_t v) { return half_to_float(v); }
  TERSE_CONVERT_HD static uint16_t store(float v) { return float_to_half(v); }
};
struct BF16 {
  using Storage = uint16_t;
  static constexpr DType kType = DType::kBFloat16;
  TERSE_CONVERT_HD static float load(uint16_t v) { return bf16_to_float(v); }
  TERSE_CONVERT_HD static uint16_t store(float v) { return float_to_bf16(v); }
};
struct F8E4M3 {
  using Storage = uint8_t;
  static constexpr DType kType = DType::kFloat8E4M3;
  TERSE_CONVERT_HD static float load(uint8_t v) { return fp8_to_float<E4M3>(v); }
  TERSE_CONVERT_HD static uint8_t store(float v) { return float_to_fp8<E4M3>(v); }
};
struct F8E5M2 {
  using Storage = uint8_t;
  static constexpr DType kType = DType::kFloat8E5M2;
  TERSE_CONVERT_HD static float load(uint8_t v) { return fp8_to_float<E5M2>(v); }
  TERSE_CONVERT_HD static uint8_t store(float v) { return float_to_fp8<E5M2>(v); }
};

// A decoded value as `Out` can hold it: clamped to Out's largest finite magnitude (65504 for fp16,
// 0x7f7f for bf16, 448 and 57344 for fp8; fp32 is left alone). Decoders store through it, since an
// unbiased estimate (Random-K's scaling, QSGD's levels) can exceed the range of the type it is
// decoded into, and a finite input must never decode as infinity. NaN passes through.
template <typename Out>
TERSE_HD float saturate_to(float value) {
  if (Out::kType == DType::kFloat32) return value;
  const float limit = Out::kType == DType::kFloat16      ? 65504.0f
                      : Out::kType == DType::kFloat8E4M3 ? E4M3::kMaxNormal
                      : Out::kType == DType::kFloat8E5M2 ? E5M2::kMaxNormal
                                                         : 3.38953139e38f;
  return value > limit ? limit : (value < -limit ? -limit : value);
}

// Calls fn(F32{}) / fn(F16{}) / fn(BF16{}) / fn(F8E4M3{}) / fn(F8E5M2{}) for `dtype`: one switch
// instead of one per codec.
template <typename Fn>
auto dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat16:
      return fn(F16{});
    case DType::kBFloat16:
      return fn(BF16{});
    case DType::kFloat8E4M3:
      return fn(F8E4M3{});
    case DType::kFloat8E5M2:
      return fn(F8E5M2{});
    default:
      return fn(F32{});
  }
}

}  // namespace terse
