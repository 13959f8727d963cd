#include "plugin/stream_wait.h"

#if TERSE_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "plugin/stream_wait_kernel.h"

namespace terse {
namespace {

// The v2 stream memory operations, current since CUDA 11.7 (and always enabled since 12.0).
using WaitValue32 = PFN_cuStreamWaitValue32_v11070;
constexpr unsigned int kWaitValue32Version = 11070;

// cuStreamWaitValue32 from the driver, or null (with the reason) where it has none.
// cudaEnableDefault: this file is compiled without per-thread default streams, so a null
// stream means the legacy default stream here as in the runtime calls beside it.
void* driver_wait_value_32(std::string* why) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(
      "cuStreamWaitValue32", &function, kWaitValue32Version, cudaEnableDefault, &status);
  if (error != cudaSuccess || status != cudaDriverEntryPointSuccess || function == nullptr) {
    cudaGetLastError();
    *why = std::string("the driver has no cuStreamWaitValue32 (") + cudaGetErrorString(error) +
           ", query status " + std::to_string(static_cast<int>(status)) + ")";
    return nullptr;
  }
  return function;
}

// Whether the driver accepts a wait on the flag: one wait that is already satisfied (nothing
// was queued yet, the flag is 0), on a private stream, synchronised. The attribute
// CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR only covers the NOR condition; trying the
// call itself is the reliable test (drivers before 12.0 could disable memory operations).
bool probe_wait_value_32(void* function, uintptr_t flag, std::string* why) {
  cudaStream_t stream = nullptr;
  cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("no stream to probe on: ") + cudaGetErrorString(error);
    return false;
  }
  const CUresult waited = reinterpret_cast<WaitValue32>(function)(
      stream, static_cast<CUdeviceptr>(flag), 0, CU_STREAM_WAIT_VALUE_GEQ);
  error = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (waited != CUDA_SUCCESS || error != cudaSuccess) {
    cudaGetLastError();
    *why = "cuStreamWaitValue32 returned CUresult " + std::to_string(static_cast<int>(waited)) +
           " (" + cudaGetErrorString(error) + ")";
    return false;
  }
  return true;
}

void warn_fallback_once(int device, const std::string& why) {
  static std::once_flag warned;
  std::call_once(warned, [&] {
    TERSE_WARN(
        "device %d: streams cannot wait on host memory with stream memory operations (%s); "
        "they wait for terse's collectives with a polling kernel instead",
        device, why.c_str());
  });
}

}  // namespace

const char* stream_wait_method_name(StreamWaitMethod method) {
  return method == StreamWaitMethod::kMemoryOperation ? "memop" : "kernel";
}

ncclResult_t StreamWaiter::create(int device, const uint32_t* flag,
                                  std::unique_ptr<StreamWaiter>* out) {
  const std::string setting = env_string("TERSE_STREAM_WAIT", "auto");
  if (setting != "auto" && setting != "memop" && setting != "kernel") {
    return fail(ncclInvalidArgument, "TERSE_STREAM_WAIT=%s is not auto, memop or kernel",
                setting.c_str());
  }
  std::unique_ptr<StreamWaiter> waiter(new StreamWaiter());
  void* device_flag = nullptr;
  const cudaError_t error = cudaHostGetDevicePointer(&device_flag, const_cast<uint32_t*>(flag), 0);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "device %d cannot map the stream flag: %s", device,
                cudaGetErrorString(error));
  }
  waiter->flag_device_address_ = reinterpret_cast<uintptr_t>(device_flag);
  if (setting != "kernel") {
    std::string why;
    void* function = driver_wait_value_32(&why);
    if (function != nullptr && probe_wait_value_32(function, waiter->flag_device_address_, &why)) {
      waiter->method_ = StreamWaitMethod::kMemoryOperation;
      waiter->wait_value_32_ = function;
    } else if (setting == "memop") {
      return fail(ncclInvalidUsage, "TERSE_STREAM_WAIT=memop, but on device %d %s", device,
                  why.c_str());
    } else {
      warn_fallback_once(device, why);
    }
  }
  TERSE_INFO("device %d: streams wait for staged collectives with %s", device,
             stream_wait_method_name(waiter->method_));
  *out = std::move(waiter);
  return ncclSuccess;
}

ncclResult_t StreamWaiter::wait(cudaStream_t stream, uint32_t sequence) const {
  if (method_ == StreamWaitMethod::kMemoryOperation) {
    const CUresult result = reinterpret_cast<WaitValue32>(wait_value_32_)(
        stream, static_cast<CUdeviceptr>(flag_device_address_), sequence, CU_STREAM_WAIT_VALUE_GEQ);
    if (result != CUDA_SUCCESS) {
      return fail(ncclUnhandledCudaError, "cuStreamWaitValue32 on stream %p failed: CUresult %d",
                  static_cast<void*>(stream), static_cast<int>(result));
    }
    return ncclSuccess;
  }
  const cudaError_t error = launch_sequence_wait_kernel(
      stream, reinterpret_cast<const uint32_t*>(flag_device_address_), sequence);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "the stream-wait kernel on stream %p failed to launch: %s",
                static_cast<void*>(stream), cudaGetErrorString(error));
  }
  return ncclSuccess;
}

}  // namespace terse

#endif  // TERSE_HAVE_CUDA
