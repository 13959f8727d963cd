#include "plugin/pointer_memory.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {

BufferMemory query_buffer_memory(const void* pointer) {
  BufferMemory memory;
#if TERSE_HAVE_CUDA
  if (pointer == nullptr) return memory;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();
    return memory;
  }
  if (attributes.type == cudaMemoryTypeDevice) {
    memory.kind = MemoryKind::kDevice;
    memory.device = attributes.device;
  } else if (attributes.type == cudaMemoryTypeManaged) {
    memory.kind = MemoryKind::kManaged;
    memory.device = attributes.device;
  }
#else
  (void)pointer;
#endif
  return memory;
}

}  // namespace terse
