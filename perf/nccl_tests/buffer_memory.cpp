#include "perf/nccl_tests/buffer_memory.h"

#include <cstdlib>

#include "perf/nccl_tests/device_runtime.h"

namespace terse {
namespace perf {

bool resolve_buffer_memory(BufferMemory* memory, std::string* error) {
  std::string source = std::string("-B ") + buffer_memory_name(*memory);
  if (*memory == BufferMemory::kAuto) {
    const char* variable = getenv("TERSE_PERF_BUFFERS");
    if (variable != nullptr && *variable != '\0') {
      if (!parse_buffer_memory(variable, memory)) {
        *error = std::string("TERSE_PERF_BUFFERS=") + variable + " is not host, device or managed";
        return false;
      }
      source = std::string("TERSE_PERF_BUFFERS=") + variable;
    }
  }
  if (*memory == BufferMemory::kHost) return true;  // CUDA is never touched
  int devices = 0;
  std::string why;
  const bool have_devices = cuda_device_count(&devices, &why);
  if (*memory == BufferMemory::kAuto) {
    *memory = have_devices ? BufferMemory::kDevice : BufferMemory::kHost;
    return true;
  }
  if (have_devices) return true;
  *error = source + ": no CUDA device to allocate the buffers on (" + why + ")";
  return false;
}

bool rank_device(int local_rank, int threads, int slot, int* device, std::string* error) {
  int devices = 0;
  if (!cuda_device_count(&devices, error)) return false;
  const char* first = getenv("NCCL_TESTS_DEVICE");
  if (first != nullptr && *first != '\0') {
    *device = atoi(first) + slot;
    if (*device < 0 || *device >= devices) {
      *error = std::string("NCCL_TESTS_DEVICE=") + first + " puts rank thread " +
               std::to_string(slot) + " on GPU " + std::to_string(*device) + ", but " +
               std::to_string(devices) + " GPU(s) are visible";
      return false;
    }
    return true;
  }
  *device = (local_rank * threads + slot) % devices;
  return true;
}

}  // namespace perf
}  // namespace terse
