// A build without CUDA (TERSE_CUDA=OFF, or no nvcc): libterse takes no device buffers there, so
// no device is ever available and -B device|managed is refused with this sentence before any
// other function here could be called; those fail plainly.
#include "perf/nccl_tests/device_runtime.h"

namespace terse {
namespace perf {
namespace {

constexpr const char* kNoCuda =
    "this build of terse has no CUDA; configure with -DTERSE_CUDA=ON where nvcc exists";

bool no_cuda(std::string* why) {
  *why = kNoCuda;
  return false;
}

}  // namespace

bool cuda_device_count(int* count, std::string* why) {
  *count = 0;
  return no_cuda(why);
}

bool cuda_select_device(int, std::string* why) {
  return no_cuda(why);
}

bool cuda_create_stream(void**, std::string* why) {
  return no_cuda(why);
}

bool cuda_synchronize(void*, std::string* why) {
  return no_cuda(why);
}

std::string cuda_device_description(int) {
  return kNoCuda;
}

void* cuda_allocate(size_t, bool) {
  return nullptr;
}

void cuda_free(void*) {}

void* cuda_allocate_pinned(size_t) {
  return nullptr;
}

void cuda_free_pinned(void*) {}

bool cuda_copy(void*, const void*, size_t, void*, std::string* why) {
  return no_cuda(why);
}

}  // namespace perf
}  // namespace terse
