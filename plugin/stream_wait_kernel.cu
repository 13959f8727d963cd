#include "plugin/stream_wait_kernel.h"

namespace terse {
namespace {

// volatile: every iteration reads host memory again (over PCIe/C2C) instead of a cached value.
__global__ void wait_for_sequence(const volatile uint32_t* flag, uint32_t sequence) {
  while (static_cast<int32_t>(*flag - sequence) < 0) {
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t launch_sequence_wait_kernel(cudaStream_t stream, const uint32_t* flag,
                                        uint32_t sequence) {
  const volatile uint32_t* polled = flag;
  void* arguments[] = {&polled, &sequence};
  // cudaLaunchKernel returns this launch's error, not an earlier one of the application's.
  return cudaLaunchKernel(reinterpret_cast<const void*>(&wait_for_sequence), dim3(1), dim3(1),
                          arguments, 0, stream);
}

}  // namespace terse
