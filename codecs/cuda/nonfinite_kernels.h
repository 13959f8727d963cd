// The non-finite escapes of device tensors (nonfinite_escapes.h): finding whether a device tensor
// holds NaN or Inf, and writing a message's escaped elements into a device output
// (nonfinite_kernels.cu). Plain C++ so host code can call them; only CUDA builds define them.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "codecs/dtype.h"

namespace terse {

// Sets *flag (memory the device can write: mapped pinned host memory) to 1 when any of the
// `count` elements of `input` (device) is NaN or Inf; leaves it alone otherwise. Asynchronous on
// `stream`: the caller zeroes the flag before and reads it after synchronising.
ncclResult_t launch_find_nonfinite(const void* input, size_t count, DType dtype, unsigned int* flag,
                                   void* stream);

// Writes (or, when `accumulate`, adds) each escaped element's value (+Inf, -Inf, quiet NaN) into
// `output` (device, `count` elements of `dtype`). `body` is the escape section's body in device
// memory (the message's own bytes: a list of `escapes` uint32 indices then as many kind bytes, or
// the 2-bit map), already validated on the host by read_escapes. Asynchronous on `stream`.
// Loads the kernels of both calls for every dtype (cudaFuncGetAttributes): the escapes' kernels
// run only for a message that escapes NaN or Inf, perhaps first while a stream is held, and with
// lazy loading a kernel's first load waits for the device to be idle.
ncclResult_t load_nonfinite_kernels();

ncclResult_t launch_apply_escapes(const uint8_t* body, bool list, uint64_t escapes, size_t count,
                                  void* output, DType dtype, bool accumulate, void* stream);

}  // namespace terse
