// Per-element math of the cast codecs (none, fp16, bf16), shared by the CPU loops and the CUDA
// kernels. `Wire` is the element type on the wire: the input type itself for `none`.
#pragma once

#include <cstddef>

#include "codecs/dtype.h"
#include "common/host_device.h"

namespace terse {

template <typename In, typename Wire>
TERSE_HD void cast_encode_element(const typename In::Storage* input,
                                  typename Wire::Storage* payload, float* error, size_t i) {
  float value = In::load(input[i]);
  typename Wire::Storage wire = Wire::store(value);
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
