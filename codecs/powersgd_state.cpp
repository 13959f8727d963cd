#include "codecs/powersgd_state.h"

#include "codecs/device_support.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

PowerSgdState::PowerSgdState(size_t rows, size_t cols, int rank)
    : rows_(rows), cols_(cols), rank_(rank), host_q_(cols * static_cast<size_t>(rank)) {
  powersgd_initial_q(host_q_.data(), cols_, rank_, 0, Memory::kHost, nullptr);
}

PowerSgdState::~PowerSgdState() {
#if TERSE_HAVE_CUDA
  if (device_q_ != nullptr) release_when_allowed([q = device_q_] { cudaFree(q); });
#endif
}

size_t PowerSgdState::bytes() const {
  size_t q_bytes = host_q_.size() * sizeof(float);
  return q_bytes + (device_q_ != nullptr ? q_bytes : 0) + workspace_.bytes();
}

ncclResult_t PowerSgdState::q(Memory memory, void* stream, float** q) {
  if (memory == Memory::kHost) {
#if TERSE_HAVE_CUDA
    if (q_location_ == Memory::kDevice) {
      cudaStream_t last = static_cast<cudaStream_t>(device_stream_);
      cudaError_t error = cudaMemcpyAsync(host_q_.data(), device_q_, host_q_.size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, last);
      if (error == cudaSuccess) error = cudaStreamSynchronize(last);
      if (error != cudaSuccess) {
        return cuda_call_failed(error, "powersgd: copying the warm-start Q to the host");
      }
    }
#endif
    q_location_ = Memory::kHost;
    *q = host_q_.data();
    return ncclSuccess;
  }
  TERSE_CHECK(require_cuda("powersgd"));
  (void)stream;
#if TERSE_HAVE_CUDA
  size_t q_bytes = host_q_.size() * sizeof(float);
  if (device_q_ == nullptr) TERSE_CHECK(require_allocation_allowed("powersgd Q", q_bytes));
  if (device_q_ == nullptr && cudaMalloc(&device_q_, q_bytes == 0 ? 1 : q_bytes) != cudaSuccess) {
    device_q_ = nullptr;
    return fail(ncclSystemError, "powersgd: cannot allocate the %zu-byte device Q", q_bytes);
  }
  if (q_location_ == Memory::kHost) {
    cudaError_t error = cudaMemcpyAsync(device_q_, host_q_.data(), q_bytes, cudaMemcpyHostToDevice,
                                        static_cast<cudaStream_t>(stream));
    // One synchronisation per switch of sides keeps the hand-over simple.
    if (error == cudaSuccess) error = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    if (error != cudaSuccess) {
      return cuda_call_failed(error, "powersgd: copying the warm-start Q to the device");
    }
  }
  q_location_ = Memory::kDevice;
  device_stream_ = stream;
  *q = device_q_;
#endif
  return ncclSuccess;
}

}  // namespace terse
