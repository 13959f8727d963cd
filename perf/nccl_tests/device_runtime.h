// The few CUDA runtime calls the perf binaries make for device buffers (-B device|managed),
// behind one interface so that a build without CUDA links without the runtime: there
// (device_runtime_absent.cpp) no device is ever available, and -B device is refused before any
// other of these is called. Streams are opaque pointers, as cudaStream_t is.
#pragma once

#include <cstddef>
#include <string>

namespace terse {
namespace perf {

// The number of CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies), or false with a
// sentence saying why there are none usable (no CUDA in this build, the runtime's error).
bool cuda_device_count(int* count, std::string* why);

// Each returns false with the runtime's error in `*why`.
bool cuda_select_device(int device, std::string* why);  // cudaSetDevice, for this thread
bool cuda_create_stream(void** stream, std::string* why);
bool cuda_synchronize(void* stream, std::string* why);

// "[<PCI bus id>] <name>" of `device`, as nccl-tests' device lines name it.
std::string cuda_device_description(int device);

// Memory of the current device (managed: cudaMallocManaged), pinned host memory, and their
// release; null when the allocation fails.
void* cuda_allocate(size_t bytes, bool managed);
void cuda_free(void* data);
void* cuda_allocate_pinned(size_t bytes);
void cuda_free_pinned(void* data);

// Copies `bytes` from `source` to `destination` in the order of `stream` (either may be device
// memory); false with the runtime's error.
bool cuda_copy(void* destination, const void* source, size_t bytes, void* stream, std::string* why);

}  // namespace perf
}  // namespace terse
