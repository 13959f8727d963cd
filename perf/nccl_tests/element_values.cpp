#include "perf/nccl_tests/element_values.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace terse {
namespace perf {
namespace {

template <typename T>
void store_as(void* data, size_t index, T value) {
  static_cast<T*>(data)[index] = value;
}

template <typename T>
T load_as(const void* data, size_t index) {
  return static_cast<const T*>(data)[index];
}

double fp8_to_double(__nv_fp8_storage_t bits, __nv_fp8_interpretation_t format) {
  __half_raw raw = __nv_cvt_fp8_to_halfraw(bits, format);
  return static_cast<double>(__half2float(__half(raw)));
}

}  // namespace

void store_element(ncclDataType_t type, void* data, size_t index, double value) {
  switch (type) {
    case ncclInt8:
      return store_as(data, index, static_cast<int8_t>(value));
    case ncclUint8:
      return store_as(data, index, static_cast<uint8_t>(value));
    case ncclInt32:
      return store_as(data, index, static_cast<int32_t>(value));
    case ncclUint32:
      return store_as(data, index, static_cast<uint32_t>(value));
    case ncclInt64:
      return store_as(data, index, static_cast<int64_t>(value));
    case ncclUint64:
      return store_as(data, index, static_cast<uint64_t>(value));
    case ncclFloat16:
      return store_as(data, index, __double2half(value));
    case ncclFloat32:
      return store_as(data, index, static_cast<float>(value));
    case ncclFloat64:
      return store_as(data, index, value);
    case ncclBfloat16:
      return store_as(data, index, __double2bfloat16(value));
    case ncclFloat8e4m3:
      return store_as(data, index, __nv_cvt_double_to_fp8(value, __NV_SATFINITE, __NV_E4M3));
    case ncclFloat8e5m2:
      return store_as(data, index, __nv_cvt_double_to_fp8(value, __NV_SATFINITE, __NV_E5M2));
    default:
      return;
  }
}

double load_element(ncclDataType_t type, const void* data, size_t index) {
  switch (type) {
    case ncclInt8:
      return load_as<int8_t>(data, index);
    case ncclUint8:
      return load_as<uint8_t>(data, index);
    case ncclInt32:
      return load_as<int32_t>(data, index);
    case ncclUint32:
      return load_as<uint32_t>(data, index);
    case ncclInt64:
      return static_cast<double>(load_as<int64_t>(data, index));
    case ncclUint64:
      return static_cast<double>(load_as<uint64_t>(data, index));
    case ncclFloat16:
      return __half2float(load_as<__half>(data, index));
    case ncclFloat32:
      return load_as<float>(data, index);
    case ncclFloat64:
      return load_as<double>(data, index);
    case ncclBfloat16:
      return __bfloat162float(load_as<__nv_bfloat16>(data, index));
    case ncclFloat8e4m3:
      return fp8_to_double(load_as<__nv_fp8_storage_t>(data, index), __NV_E4M3);
    case ncclFloat8e5m2:
      return fp8_to_double(load_as<__nv_fp8_storage_t>(data, index), __NV_E5M2);
    default:
      return 0.0;
  }
}

}  // namespace perf
}  // namespace terse
