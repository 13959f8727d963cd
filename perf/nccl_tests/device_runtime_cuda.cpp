#include <cuda_runtime_api.h>

#include <cstdio>

#include "perf/nccl_tests/device_runtime.h"

namespace terse {
namespace perf {
namespace {

bool succeeded(cudaError_t error, const char* call, std::string* why) {
  if (error == cudaSuccess) return true;
  *why = std::string(call) + ": " + cudaGetErrorString(error);
  return false;
}

}  // namespace

bool cuda_device_count(int* count, std::string* why) {
  *count = 0;
  if (!succeeded(cudaGetDeviceCount(count), "cudaGetDeviceCount", why)) return false;
  if (*count > 0) return true;
  *why = "cudaGetDeviceCount found no device";
  return false;
}

bool cuda_select_device(int device, std::string* why) {
  return succeeded(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str(),
                   why);
}

bool cuda_create_stream(void** stream, std::string* why) {
  cudaStream_t created = nullptr;
  // Non-blocking, as nccl-tests' streams: no implicit ordering with the legacy default stream.
  if (!succeeded(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags", why)) {
    return false;
  }
  *stream = created;
  return true;
}

bool cuda_synchronize(void* stream, std::string* why) {
  return succeeded(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                   "cudaStreamSynchronize", why);
}

std::string cuda_device_description(int device) {
  char bus_id[64] = "unknown bus";
  cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device);
  cudaDeviceProp properties{};
  const bool named = cudaGetDeviceProperties(&properties, device) == cudaSuccess;
  return std::string("[") + bus_id + "] " + (named ? properties.name : "unnamed CUDA device");
}

void* cuda_allocate(size_t bytes, bool managed) {
  void* data = nullptr;
  const cudaError_t error =
      managed ? cudaMallocManaged(&data, bytes, cudaMemAttachGlobal) : cudaMalloc(&data, bytes);
  return error == cudaSuccess ? data : nullptr;
}

void cuda_free(void* data) {
  cudaFree(data);
}

void* cuda_allocate_pinned(size_t bytes) {
  void* data = nullptr;
  return cudaMallocHost(&data, bytes) == cudaSuccess ? data : nullptr;
}

void cuda_free_pinned(void* data) {
  cudaFreeHost(data);
}

bool cuda_copy(void* destination, const void* source, size_t bytes, void* stream,
               std::string* why) {
  return succeeded(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault,
                                   static_cast<cudaStream_t>(stream)),
                   "cudaMemcpyAsync", why);
}

}  // namespace perf
}  // namespace terse
