// ncclMemAlloc/ncclMemFree and buffer registration.
//
// ncclMemAlloc returns what NCCL returns where it can: device memory (cudaMalloc on the
// calling thread's current device) when terse is built with CUDA and a device is present.
// Without CUDA or without a device it returns page-aligned host memory (posix_memalign), which
// terse's host path moves directly. Each allocation is recorded with its kind, so ncclMemFree
// frees it the same way and refuses a pointer ncclMemAlloc did not return.
//
// Registration has nothing to pin or map: ncclCommRegister returns a non-null handle (the
// buffer's address) and ncclCommDeregister accepts it.
//
// In wrap mode (comm_mode.h) all four are the real NCCL's: its allocator and registrations serve
// the calls it runs, and terse's side reads such memory as any device memory.
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/comm_mode.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_nccl.h"
#include "plugin/wrapped_comm.h"
#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {
namespace {

enum class AllocationKind { kHost, kDevice };

// Every live ncclMemAlloc allocation and how it was made.
class Allocations {
 public:
  void add(void* pointer, AllocationKind kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    kinds_[pointer] = kind;
  }
  // Removes `pointer`; false if it is not a live allocation.
  bool remove(void* pointer, AllocationKind* kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = kinds_.find(pointer);
    if (found == kinds_.end()) return false;
    *kind = found->second;
    kinds_.erase(found);
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, AllocationKind> kinds_;
};

Allocations& allocations() {
  static Allocations* instance = new Allocations();  // outlives every static destructor
  return *instance;
}

}  // namespace
}  // namespace terse

using terse::fail;

TERSE_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) try {
  TERSE_FORWARD_NESTED(ncclMemAlloc, ptr, size);
  if (terse::wrap_mode()) {
    return terse::forwarded(
        terse::call_real(terse::real_nccl()->ncclMemAlloc, "ncclMemAlloc", ptr, size),
        "ncclMemAlloc", nullptr);
  }
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ptr is null");
  if (size == 0) return fail(ncclInvalidArgument, "size is 0");
  void* memory = nullptr;
  const int device = terse::current_cuda_device();
#if TERSE_HAVE_CUDA
  if (device >= 0) {
    const cudaError_t error = cudaMalloc(&memory, size);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return fail(ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc of %zu bytes on device %d: %s",
                  size, device, cudaGetErrorString(error));
    }
    terse::allocations().add(memory, terse::AllocationKind::kDevice);
    *ptr = memory;
    return ncclSuccess;
  }
#else
  (void)device;
#endif
  if (posix_memalign(&memory, 4096, size) != 0) {
    return fail(ncclSystemError, "ncclMemAlloc: could not allocate %zu bytes", size);
  }
  terse::allocations().add(memory, terse::AllocationKind::kHost);
  *ptr = memory;
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclMemAlloc");
}
TERSE_PROFILER_ALIAS(ncclMemAlloc)

TERSE_API ncclResult_t ncclMemFree(void* ptr) try {
  TERSE_FORWARD_NESTED(ncclMemFree, ptr);
  if (terse::wrap_mode()) {
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclMemFree, "ncclMemFree", ptr),
                            "ncclMemFree", nullptr);
  }
  if (ptr == nullptr) return ncclSuccess;
  terse::AllocationKind kind = terse::AllocationKind::kHost;
  if (!terse::allocations().remove(ptr, &kind)) {
    return fail(ncclInvalidArgument, "ncclMemFree: ptr %p was not returned by ncclMemAlloc", ptr);
  }
#if TERSE_HAVE_CUDA
  if (kind == terse::AllocationKind::kDevice) {
    const cudaError_t error = cudaFree(ptr);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return fail(ncclUnhandledCudaError, "ncclMemFree: cudaFree of %p: %s", ptr,
                  cudaGetErrorString(error));
    }
    return ncclSuccess;
  }
#endif
  std::free(ptr);
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclMemFree");
}
TERSE_PROFILER_ALIAS(ncclMemFree)

TERSE_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                        void** handle) try {
  TERSE_FORWARD_NESTED(ncclCommRegister, comm, buff, size, handle);
  terse::Communicator* engine = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "ncclCommRegister", &engine));
  if (comm->real != nullptr) {
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommRegister,
                                             "ncclCommRegister", comm->real, buff, size, handle),
                            "ncclCommRegister", comm->real);
  }
  if (buff == nullptr) return fail(ncclInvalidArgument, "buff is null");
  if (handle == nullptr) return fail(ncclInvalidArgument, "handle is null");
  (void)size;
  *handle = buff;
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommRegister");
}
TERSE_PROFILER_ALIAS(ncclCommRegister)

TERSE_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) try {
  TERSE_FORWARD_NESTED(ncclCommDeregister, comm, handle);
  terse::Communicator* engine = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "ncclCommDeregister", &engine));
  if (comm->real != nullptr) {
    return terse::forwarded(terse::call_real(terse::real_nccl()->ncclCommDeregister,
                                             "ncclCommDeregister", comm->real, handle),
                            "ncclCommDeregister", comm->real);
  }
  if (handle == nullptr) return fail(ncclInvalidArgument, "handle is null");
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("ncclCommDeregister");
}
TERSE_PROFILER_ALIAS(ncclCommDeregister)
