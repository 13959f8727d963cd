#include "codecs/device_support.h"

#include <algorithm>
#include <atomic>

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
      if (error != cudaSuccess)
        return cuda_call_failed(error, "cudaHostAlloc of the non-finite flag");
      void* mapped = nullptr;
      error = cudaHostGetDevicePointer(&mapped, made, 0);
      if (error != cudaSuccess) {
        cudaFreeHost(made);
        return cuda_call_failed(error, "cudaHostGetDevicePointer of the non-finite flag");
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
  if (error != cudaSuccess)
    return cuda_call_failed(error, "looking for non-finite device elements");
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
  return error == cudaSuccess ? ncclSuccess
                              : cuda_call_failed(error, "a copy between host and device");
#else
  (void)to;
  (void)from;
  (void)stream;
  return bytes == 0 ? ncclSuccess : require_cuda("a copy between host and device memory");
#endif
}

namespace {

// How many blocks of `threads` the current device holds at once (every SM full), read once per
// device: a grid-stride kernel needs no more, and a grid of this size costs the host build of
// the kernels (tests/host_kernels) a quarter of the fibers of the former fixed 8192 blocks.
size_t resident_blocks(unsigned threads) {
  constexpr size_t kFallback = 8192;  // where the device cannot be asked
#if TERSE_HAVE_CUDA
  constexpr int kDevices = 64;
  static std::atomic<size_t> threads_per_device[kDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return kFallback;
  size_t resident = threads_per_device[device].load(std::memory_order_relaxed);
  if (resident == 0) {
    int sms = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device) !=
            cudaSuccess ||
        sms <= 0 || per_sm <= 0) {
      return kFallback;
    }
    resident = static_cast<size_t>(sms) * static_cast<size_t>(per_sm);
    threads_per_device[device].store(resident, std::memory_order_relaxed);
  }
  return std::max<size_t>(1, resident / threads);
#else
  (void)threads;
  return kFallback;
#endif
}

}  // namespace

ncclResult_t cuda_call_failed(int error, const char* what) {
#if TERSE_HAVE_CUDA
  cudaGetLastError();
  return fail(ncclUnhandledCudaError, "%s: %s", what,
              cudaGetErrorString(static_cast<cudaError_t>(error)));
#else
  return fail(ncclUnhandledCudaError, "%s: CUDA error %d", what, error);
#endif
}

unsigned grid_for(size_t items, unsigned threads) {
  // One full wave of the device at most; grid-stride loops do the rest.
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min(resident_blocks(threads), (items + threads - 1) / threads)));
}

}  // namespace terse
