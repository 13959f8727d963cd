#include "plugin/stream_wait.h"

#if TERSE_HAVE_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

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

// Whether a wait with `function` on a mapped host word holds a stream until the host writes the
// word, and no longer: on a private stream and word, a wait for 1 followed by an event; the event
// must still be pending 20 ms later (the wait waits) and complete within 2 s of the host writing
// 1 (the GPU sees the host's write). The attribute
// CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR only covers the NOR condition; trying the
// call itself is the reliable test (drivers before 12.0 could disable memory operations). Measured
// on an H200: the stream ran 0.2-0.4 ms after the write (perf/stream_hold_probe).
bool probe_wait_value_32(void* function, uint32_t* word, std::string* why) {
  void* device_word = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t passed = nullptr;
  // No frees here: cudaFree and cudaFreeHost wait for every stream (stream_hold_gate.h).
  auto release = [&] {
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (passed != nullptr) cudaEventDestroy(passed);
  };
  __atomic_store_n(word, 0u, __ATOMIC_RELEASE);
  cudaError_t error = cudaHostGetDevicePointer(&device_word, word, 0);
  if (error == cudaSuccess) error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error == cudaSuccess) error = cudaEventCreateWithFlags(&passed, cudaEventDisableTiming);
  if (error != cudaSuccess) {
    *why = std::string("no stream, event or device address of the word to probe with: ") +
           cudaGetErrorString(error);
    release();
    return false;
  }
  const CUresult waited = reinterpret_cast<WaitValue32>(function)(
      stream, reinterpret_cast<CUdeviceptr>(device_word), 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (waited != CUDA_SUCCESS) {
    *why = "cuStreamWaitValue32 returned CUresult " + std::to_string(static_cast<int>(waited));
    __atomic_store_n(word, 1u, __ATOMIC_RELEASE);
    cudaStreamSynchronize(stream);
    release();
    return false;
  }
  error = cudaEventRecord(passed, stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool held = error == cudaSuccess && cudaEventQuery(passed) == cudaErrorNotReady;
  __atomic_store_n(word, 1u, __ATOMIC_RELEASE);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  cudaError_t query = cudaErrorNotReady;
  while ((query = cudaEventQuery(passed)) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!held || query != cudaSuccess) {
    *why = !held ? std::string("the stream ran past a wait whose value the host had not written")
                 : "the host's write did not release the waiting stream within 2 s (" +
                       std::string(cudaGetErrorString(query)) + ")";
    // Whatever happened, nothing of this probe may stay queued on the device.
    cudaStreamSynchronize(stream);
    release();
    return false;
  }
  release();
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

ncclResult_t StreamWaiter::create(int device, const uint32_t* flag, uint32_t* probe_word,
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
    if (function != nullptr && probe_wait_value_32(function, probe_word, &why)) {
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
