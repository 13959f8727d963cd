#include "plugin/pointer_memory.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

BufferMemory query_buffer_memory(const void* pointer) {
  BufferMemory memory;
#if TERSE_HAVE_CUDA
  // Without a usable device no pointer can be device memory; asking CUDA anyway costs a failing
  // runtime call on every collective (about a tenth of an 8-byte allreduce). The device count of
  // a process does not change once CUDA has looked, so it is asked once.
  static const bool devices_present = [] {
    int count = 0;
    const bool present = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    cudaGetLastError();
    return present;
  }();
  if (pointer == nullptr || !devices_present) return memory;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();
    return memory;
  }
  if (attributes.type == cudaMemoryTypeDevice) {
    memory.kind = BufferKind::kDevice;
    memory.device = attributes.device;
  } else if (attributes.type == cudaMemoryTypeManaged) {
    memory.kind = BufferKind::kManaged;
    memory.device = attributes.device;
  }
#else
  (void)pointer;
#endif
  return memory;
}

}  // namespace terse
