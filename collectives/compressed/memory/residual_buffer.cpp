#include "collectives/compressed/memory/residual_buffer.h"

#include <cstdlib>
#include <utility>

#include "codecs/device_support.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

ResidualBuffer::~ResidualBuffer() {
  release();
}

ResidualBuffer::ResidualBuffer(ResidualBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      memory_(other.memory_) {}

ResidualBuffer& ResidualBuffer::operator=(ResidualBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    memory_ = other.memory_;
  }
  return *this;
}

void ResidualBuffer::release() {
  if (data_ == nullptr) return;
#if TERSE_HAVE_CUDA
  if (memory_ == Memory::kDevice) {
    // cudaFree waits for queued work that may still use the buffer, and for every stream: not
    // while a stream is held (stream_hold_gate.h).
    release_when_allowed([data = data_] { cudaFree(data); });
    data_ = nullptr;
    return;
  }
#endif
  free(data_);
  data_ = nullptr;
}

ncclResult_t ResidualBuffer::allocate(size_t count, Memory memory, void* stream, const char* what,
                                      ResidualBuffer* buffer) {
  ResidualBuffer result;
  result.memory_ = memory;
  result.count_ = count;
  if (count == 0) {
    *buffer = std::move(result);
    return ncclSuccess;
  }
  if (count > SIZE_MAX / sizeof(float)) {
    return fail(ncclInvalidArgument, "residual of %s: %zu elements do not fit in memory", what,
                count);
  }
  if (memory == Memory::kHost) {
    result.data_ = static_cast<float*>(calloc(count, sizeof(float)));
    if (result.data_ == nullptr) {
      return fail(ncclSystemError, "residual of %s: could not allocate %zu bytes of host memory",
                  what, count * sizeof(float));
    }
    *buffer = std::move(result);
    return ncclSuccess;
  }
  TERSE_CHECK(require_cuda("residual memory"));
#if TERSE_HAVE_CUDA
  TERSE_CHECK(require_allocation_allowed("residual memory", count * sizeof(float)));
  void* data = nullptr;
  cudaError_t error = cudaMalloc(&data, count * sizeof(float));
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "residual of %s: cudaMalloc of %zu bytes failed: %s", what,
                count * sizeof(float), cudaGetErrorString(error));
  }
  result.data_ = static_cast<float*>(data);
  error = cudaMemsetAsync(data, 0, count * sizeof(float), static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "residual of %s: zeroing %zu bytes failed: %s", what,
                count * sizeof(float), cudaGetErrorString(error));
  }
#else
  (void)stream;
#endif
  *buffer = std::move(result);
  return ncclSuccess;
}

}  // namespace terse
