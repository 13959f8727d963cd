#include "codecs/device_support.h"

#include <algorithm>

#include "common/result.h"
#include "common/stream_hold_gate.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "codecs/cuda/nonfinite_kernels.h"
#endif

namespace terse {

ncclResult_t require_cuda(const char* codec) {
#if TERSE_HAVE_CUDA
  (void)codec;
  return ncclSuccess;
#else
  return fail(ncclInvalidUsage, "%s: device memory passed, but terse was built without CUDA",
              codec);
#endif
}

ncclResult_t check_launch(const char* what) {
#if TERSE_HAVE_CUDA
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "%s: kernel launch failed: %s", what,
                cudaGetErrorString(error));
  }
#else
  (void)what;
#endif
  return ncclSuccess;
}

ncclResult_t require_allocation_allowed(const char* what, size_t bytes) {
  if (allocation_allowed()) {
    note_allocation(what);
    return ncclSuccess;
  }
  return fail(ncclInvalidUsage,
              "%s: %zu bytes of new device or pinned memory are needed while the call's stream is "
              "held, where CUDA's allocator may wait for that stream; the call fails and the "
              "tensor's next call runs without a hold",
              what, bytes);
}

#if TERSE_HAVE_CUDA
namespace {

ncclResult_t cuda_failed(cudaError_t error, const char* what) {
  return fail(ncclUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(error));
}

// One word of mapped pinned memory per thread that looks for non-finite values, made at its
// first look and released (when no stream of its is held) as the thread ends.
class NonfiniteFlag {
 public:
  ~NonfiniteFlag() {
    if (word_ != nullptr) {
      unsigned int* word = word_;
      release_when_allowed([word] { cudaFreeHost(word); });
    }
  }
  ncclResult_t get(unsigned int** host, unsigned int** device) {
    if (word_ == nullptr) {
      TERSE_CHECK(require_allocation_allowed("the non-finite flag", sizeof(unsigned int)));
      void* made = nullptr;
      cudaError_t error = cudaHostAlloc(&made, sizeof(unsigned int), cudaHostAllocMapped);
      if (error != cudaSuccess) return cuda_failed(error, "cudaHostAlloc of the non-finite flag");
      void* mapped = nullptr;
      error = cudaHostGetDevicePointer(&mapped, made, 0);
      if (error != cudaSuccess) {
        cudaFreeHost(made);
        return cuda_failed(error, "cudaHostGetDevicePointer of the non-finite flag");
      }
      word_ = static_cast<unsigned int*>(made);
      device_ = static_cast<unsigned int*>(mapped);
    }
    *host = word_;
    *device = device_;
    return ncclSuccess;
  }

 private:
  unsigned int* word_ = nullptr;
  unsigned int* device_ = nullptr;
};

}  // namespace
#endif

ncclResult_t device_holds_nonfinite(const void* input, size_t count, DType dtype, void* stream,
                                    bool* found) {
  *found = false;
#if TERSE_HAVE_CUDA
  if (count == 0) return ncclSuccess;
  thread_local NonfiniteFlag flag;
  unsigned int* host = nullptr;
  unsigned int* device = nullptr;
  TERSE_CHECK(flag.get(&host, &device));
  *reinterpret_cast<volatile unsigned int*>(host) = 0;
  TERSE_CHECK(launch_find_nonfinite(input, count, dtype, device, stream));
  const cudaError_t error = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) return cuda_failed(error, "looking for non-finite device elements");
  *found = *reinterpret_cast<volatile unsigned int*>(host) != 0;
  return ncclSuccess;
#else
  (void)input;
  (void)dtype;
  (void)stream;
  return count == 0 ? ncclSuccess : require_cuda("a non-finite scan of device memory");
#endif
}

ncclResult_t copy_and_wait(void* to, const void* from, size_t bytes, void* stream) {
#if TERSE_HAVE_CUDA
  if (bytes == 0) return ncclSuccess;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t error = cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, s);
  if (error == cudaSuccess) error = cudaStreamSynchronize(s);
  return error == cudaSuccess ? ncclSuccess : cuda_failed(error, "a copy between host and device");
#else
  (void)to;
  (void)from;
  (void)stream;
  return bytes == 0 ? ncclSuccess : require_cuda("a copy between host and device memory");
#endif
}

unsigned grid_for(size_t items, unsigned threads) {
  // Enough blocks to fill any current GPU several times over; grid-stride loops do the rest.
  const size_t max_blocks = 8192;
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min(max_blocks, (items + threads - 1) / threads)));
}

}  // namespace terse
