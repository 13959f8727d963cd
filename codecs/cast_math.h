// Per-element math of the cast codecs (none, fp16, bf16), shared by the CPU loops and the CUDA
// kernels. `Wire` is the element type on the wire: the input type itself for `none`.
#pragma once

#include <cstddef>

#include "codecs/dtype.h"
#include "common/host_device.h"

namespace terse {

// The largest magnitude a wire type sends for input type In: the wire type's largest finite
// value, and no more than what still decodes finite into In (bf16 rounds fp16's 65504 up to
// 65536, so an fp16 input sends at most 65280 through bf16). A finite input beyond it is sent as
// it (the error output keeps the difference) instead of rounding to infinity: compression must
// not turn a finite gradient into a non-finite result (non-finite inputs never reach a codec,
// codec.h).
template <typename In, typename Wire>
TERSE_HD float cast_wire_max() {
  if (Wire::kType == DType::kFloat16) return 65504.0f;
  if (Wire::kType == DType::kBFloat16) {
    return In::kType == DType::kFloat16 ? 65280.0f : 3.38953139e38f;  // 0x477f, 0x7f7f
  }
  return 3.40282347e38f;
}

template <typename In, typename Wire>
TERSE_HD void cast_encode_element(const typename In::Storage* input,
                                  typename Wire::Storage* payload, float* error, size_t i) {
  const float limit = cast_wire_max<In, Wire>();
  float value = In::load(input[i]);
  const float sent = value > limit ? limit : (value < -limit ? -limit : value);
  typename Wire::Storage wire = Wire::store(sent);
  payload[i] = wire;
  if (error != nullptr) error[i] = value - Wire::load(wire);
}

template <typename Wire, typename Out>
TERSE_HD void cast_decode_element(const typename Wire::Storage* payload,
                                  typename Out::Storage* output, bool accumulate, size_t i) {
  float value = Wire::load(payload[i]);
  if (accumulate) value += Out::load(output[i]);
  output[i] = Out::store(value);
}

}  // namespace terse
