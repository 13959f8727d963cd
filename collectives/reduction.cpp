#include "collectives/reduction.h"

#include <cuda_fp8.h>

#include <cstdint>

#include "common/float_convert.h"
#include "common/host_device.h"

namespace terse {
namespace {

// Typed views: Storage is the element as stored; Compute the type each operation runs in.
template <typename T>
struct Plain {
  using Storage = T;
  using Compute = T;
  static Compute load(T value) { return value; }
  static T store(Compute value) { return value; }
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t value) { return half_to_float(value); }
  static uint16_t store(float value) { return float_to_half(value); }
};
struct BFloat16 {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t value) { return bf16_to_float(value); }
  static uint16_t store(float value) { return float_to_bf16(value); }
};
template <__nv_fp8_interpretation_t kFormat>
struct Fp8 {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t value) {
    __half_raw half = __nv_cvt_fp8_to_halfraw(value, kFormat);
    return half_to_float(half.x);
  }
  static uint8_t store(float value) {
    return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, kFormat);
  }
};

// output[i] = left[i] (kind) right[i]; `left` is the accumulator of reduce_into.
template <typename View>
TERSE_CPU_DISPATCH void reduce_loop(ReduceKind kind, typename View::Storage* output,
                                    const typename View::Storage* left,
                                    const typename View::Storage* right, size_t count) {
  using C = typename View::Compute;
  switch (kind) {
    case ReduceKind::kSum:
      for (size_t i = 0; i < count; ++i) {
        output[i] = View::store(C(View::load(left[i]) + View::load(right[i])));
      }
      break;
    case ReduceKind::kProd:
      for (size_t i = 0; i < count; ++i) {
        output[i] = View::store(C(View::load(left[i]) * View::load(right[i])));
      }
      break;
    case ReduceKind::kMax:
      for (size_t i = 0; i < count; ++i) {
        C a = View::load(left[i]), b = View::load(right[i]);
        output[i] = View::store(b > a ? b : a);
      }
      break;
    case ReduceKind::kMin:
      for (size_t i = 0; i < count; ++i) {
        C a = View::load(left[i]), b = View::load(right[i]);
        output[i] = View::store(b < a ? b : a);
      }
      break;
  }
}

template <typename View>
void scale_loop(typename View::Storage* output, const typename View::Storage* input, size_t count,
                double scale) {
  using C = typename View::Compute;
  const C factor = static_cast<C>(scale);
  for (size_t i = 0; i < count; ++i) output[i] = View::store(C(View::load(input[i]) * factor));
}

// Calls fn(View{}) for the NCCL type.
template <typename Fn>
void dispatch_nccl_type(ncclDataType_t type, Fn&& fn) {
  switch (type) {
    case ncclInt8:
      return fn(Plain<int8_t>{});
    case ncclUint8:
      return fn(Plain<uint8_t>{});
    case ncclInt32:
      return fn(Plain<int32_t>{});
    case ncclUint32:
      return fn(Plain<uint32_t>{});
    case ncclInt64:
      return fn(Plain<int64_t>{});
    case ncclUint64:
      return fn(Plain<uint64_t>{});
    case ncclFloat16:
      return fn(Half{});
    case ncclFloat32:
      return fn(Plain<float>{});
    case ncclFloat64:
      return fn(Plain<double>{});
    case ncclBfloat16:
      return fn(BFloat16{});
    case ncclFloat8e4m3:
      return fn(Fp8<__NV_E4M3>{});
    case ncclFloat8e5m2:
      return fn(Fp8<__NV_E5M2>{});
    default:
      return;
  }
}

}  // namespace

size_t nccl_type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* nccl_type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "half";
    case ncclFloat32:
      return "float";
    case ncclFloat64:
      return "double";
    case ncclBfloat16:
      return "bfloat16";
    case ncclFloat8e4m3:
      return "f8e4m3";
    case ncclFloat8e5m2:
      return "f8e5m2";
    default:
      return "unknown";
  }
}

bool nccl_type_is_float(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 ||
         type == ncclBfloat16 || type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

void reduce_into(ncclDataType_t type, ReduceKind kind, void* accumulator, const void* operand,
                 size_t count) {
  reduce_pair(type, kind, accumulator, accumulator, operand, count);
}

void reduce_pair(ncclDataType_t type, ReduceKind kind, void* output, const void* left,
                 const void* right, size_t count) {
  dispatch_nccl_type(type, [&](auto view) {
    using View = decltype(view);
    using S = typename View::Storage;
    reduce_loop<View>(kind, static_cast<S*>(output), static_cast<const S*>(left),
                      static_cast<const S*>(right), count);
  });
}

void scale_elements(ncclDataType_t type, void* output, const void* input, size_t count,
                    double scale) {
  dispatch_nccl_type(type, [&](auto view) {
    using View = decltype(view);
    scale_loop<View>(static_cast<typename View::Storage*>(output),
                     static_cast<const typename View::Storage*>(input), count, scale);
  });
}

void divide_elements(ncclDataType_t type, void* output, const void* input, size_t count,
                     long long divisor) {
  dispatch_nccl_type(type, [&](auto view) {
    using View = decltype(view);
    using S = typename View::Storage;
    const S* in = static_cast<const S*>(input);
    S* out = static_cast<S*>(output);
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<S>(in[i] / static_cast<S>(divisor));
  });
}

}  // namespace terse
