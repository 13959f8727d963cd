#include "ps/shard_update.h"

#include <cstdint>

#include "common/float_convert.h"

namespace terse {

bool ps_type_supported(ncclDataType_t type) {
  return type == ncclFloat32 || type == ncclFloat64 || type == ncclFloat16 || type == ncclBfloat16;
}

void add_into_shard(void* shard, const void* values, size_t count, ncclDataType_t type) {
  switch (type) {
    case ncclFloat64: {
      double* out = static_cast<double*>(shard);
      const double* in = static_cast<const double*>(values);
      for (size_t i = 0; i < count; ++i) out[i] += in[i];
      break;
    }
    case ncclFloat16: {
      uint16_t* out = static_cast<uint16_t*>(shard);
      const uint16_t* in = static_cast<const uint16_t*>(values);
      for (size_t i = 0; i < count; ++i) {
        out[i] = float_to_half(half_to_float(out[i]) + half_to_float(in[i]));
      }
      break;
    }
    case ncclBfloat16: {
      uint16_t* out = static_cast<uint16_t*>(shard);
      const uint16_t* in = static_cast<const uint16_t*>(values);
      for (size_t i = 0; i < count; ++i) {
        out[i] = float_to_bf16(bf16_to_float(out[i]) + bf16_to_float(in[i]));
      }
      break;
    }
    default: {
      float* out = static_cast<float*>(shard);
      const float* in = static_cast<const float*>(values);
      for (size_t i = 0; i < count; ++i) out[i] += in[i];
      break;
    }
  }
}

}  // namespace terse
