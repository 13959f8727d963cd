// Stream-ordered scratch memory for the sparsifiers' kernels: one cudaMallocAsync block carved
// into aligned pieces, given back with cudaFreeAsync on the same stream. The pool keeps the
// memory between calls, so steady-state encodes do not reach the driver.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

#include "codecs/device_support.h"
#include "common/result.h"

namespace terse {

// Returns ncclUnhandledCudaError naming `what` when `call` fails (cuda_call_failed).
#define TERSE_SPARSE_CUDA(call, what)                              \
  do {                                                             \
    cudaError_t terse_sparse_error_ = (call);                      \
    if (terse_sparse_error_ != cudaSuccess) {                      \
      return ::terse::cuda_call_failed(terse_sparse_error_, what); \
    }                                                              \
  } while (0)

class SparseScratch {
 public:
  explicit SparseScratch(cudaStream_t stream) : stream_(stream) {}
  ~SparseScratch() {
    // A destructor cannot return the failure; it must not leave it as the thread's last error
    // for an unrelated later call to report either.
    if (base_ != nullptr && cudaFreeAsync(base_, stream_) != cudaSuccess) cudaGetLastError();
  }
  SparseScratch(const SparseScratch&) = delete;
  SparseScratch& operator=(const SparseScratch&) = delete;

  // Reserves `bytes` and returns the piece's offset; call before allocate().
  size_t reserve(size_t bytes) {
    size_t offset = size_;
    size_ += (bytes + kAlignment - 1) / kAlignment * kAlignment;
    return offset;
  }

  ncclResult_t allocate(const char* what) {
    if (size_ == 0) return ncclSuccess;
    TERSE_SPARSE_CUDA(cudaMallocAsync(&base_, size_, stream_), what);
    return ncclSuccess;
  }

  template <typename T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + offset);
  }

 private:
  static constexpr size_t kAlignment = 256;
  cudaStream_t stream_;
  void* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace terse
