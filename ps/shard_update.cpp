#include "ps/shard_update.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "codecs/codec.h"
#include "common/float_convert.h"
#include "common/result.h"

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

ncclResult_t apply_push(uint8_t rule, PsEncoding encoding, const uint8_t* values,
                        size_t value_bytes, const Codec* decoder, DType codec_dtype,
                        ncclDataType_t type, size_t count, uint8_t* shard, size_t shard_bytes,
                        std::string* why) {
  if (rule == 0) {
    std::fill(shard, shard + shard_bytes, 0);
  } else if (rule == 1) {
    std::memcpy(shard, values, shard_bytes);
  } else if (encoding == PsEncoding::kCodec) {
    // Decode validates the whole message before writing: a bad one leaves the shard alone.
    if (decoder->decode(values, value_bytes, shard, count, codec_dtype,
                        /*accumulate=*/true, DecodeContext{}) != ncclSuccess) {
      *why = std::string("the compressed push did not decode: ") + last_error();
      return ncclInvalidArgument;
    }
  } else {
    add_into_shard(shard, values, count, type);
  }
  return ncclSuccess;
}

}  // namespace terse
