// What device_staging.cpp, staging_batch.cpp and backend_stream_hold.cpp share beyond
// device_staging.h (CUDA builds): the communicator's device made current for a scope (and
// cuda_failure.h), and the host function that marks a proxy unit ready.
#pragma once

#if TERSE_HAVE_CUDA

#include <cuda_runtime.h>
#include <nccl.h>

#include "plugin/cuda_failure.h"

namespace terse {

// Makes `device` current for a scope (the streams and events of a communicator belong to its
// device, whichever device the calling thread uses) and restores the caller's.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) {
      result_ = cudaSetDevice(device);
      changed_ = result_ == cudaSuccess;
    }
  }
  ~CurrentDevice() {
    if (changed_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  cudaError_t result() const { return result_; }

 private:
  int previous_ = -1;
  bool changed_ = false;
  cudaError_t result_ = cudaSuccess;
};

// The host function that marks the unit its ticket (a new std::shared_ptr<StreamProxy::Unit>)
// points to ready, and deletes the ticket (staging_batch.cpp).
void CUDART_CB inputs_staged(void* ticket);

}  // namespace terse

#endif  // TERSE_HAVE_CUDA
