// The kernels a device execution backend (cuda_backend.h) launches, behind one small interface:
// CudaBackend owns the stream order, the copies and the events, and asks a DeviceCompute for the
// arithmetic. make_cuda_compute() gives the real one (the codecs' Memory::kDevice path and the
// residual and cast kernels); tests on a machine without a GPU give one that runs the CPU code
// inside host functions on the same stream (tests/compressed/device/emulated_compute.h), so the
// backend's ordering is tested against a fake CUDA runtime.
//
// Every pointer is device memory except where said; every call only enqueues work on `stream`
// (a cudaStream_t), in call order, and must not wait for it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>

#include "codecs/codec.h"
#include "codecs/dtype.h"
#include "collectives/compressed/low_rank_step.h"

namespace terse {

class DeviceCompute {
 public:
  virtual ~DeviceCompute() = default;

  // Loads the kernels a call may launch only for some data (a message's non-finite escapes), so
  // that none is loaded for the first time while a caller's stream is held: with lazy loading
  // (CUDA 12.2+'s default) a kernel's first load waits for the device to be idle. The backend
  // calls it when it is made, before any hold.
  virtual ncclResult_t load_kernels() = 0;

  // values[i] = input[i] (as fp32) + residual[i] (residual may be null: the conversion alone).
  virtual ncclResult_t compensate(DType input_type, const void* input, const float* residual,
                                  float* values, size_t count, void* stream) = 0;
  // sum[i] += addend[i] (addend of `addend_type`, as fp32).
  virtual ncclResult_t add(DType addend_type, const void* addend, float* sum, size_t count,
                           void* stream) = 0;
  // output[i] = values[i] * scale in output_type (scale 1: the conversion alone).
  virtual ncclResult_t store(const float* values, float scale, DType output_type, void* output,
                             size_t count, void* stream) = 0;
  // codec.encode with context.memory == Memory::kDevice and context.stream == stream;
  // *message_bytes must be known on return.
  virtual ncclResult_t encode(Codec& codec, const void* input, size_t count, DType dtype,
                              const EncodeContext& context, void* message, size_t capacity,
                              size_t* message_bytes) = 0;
  // Whether encode_compensated runs `codec` fused (Codec::fuses_device_compensation).
  virtual bool fuses_compensation(const Codec& codec) const = 0;
  // codec.encode_compensated on the device: v = input (input_type, as fp32) + residual encoded
  // as encode(v, count, fp32, context with error = residual) would, residual[i] receiving
  // v[i] - decoded[i], v never stored. Only where fuses_compensation(codec); *message_bytes
  // must be known on return.
  virtual ncclResult_t encode_compensated(Codec& codec, DType input_type, const void* input,
                                          float* residual, size_t count,
                                          const EncodeContext& context, void* message,
                                          size_t capacity, size_t* message_bytes) = 0;
  // One of PowerSGD's steps (low_rank_step.h) on device memory.
  virtual ncclResult_t low_rank(const LowRankStep& step, void* stream) = 0;
  // codec.decode of `message` (device) whose bytes are also at `host_message` (host), validated
  // from there (DecodeContext::host_message) before anything is enqueued.
  virtual ncclResult_t decode(const Codec& codec, const void* message, const void* host_message,
                              size_t message_bytes, void* output, size_t count, DType dtype,
                              bool accumulate, void* stream) = 0;
};

// The real kernels. Fails with ncclInvalidUsage in builds without CUDA.
ncclResult_t make_cuda_compute(std::unique_ptr<DeviceCompute>* out);

}  // namespace terse
