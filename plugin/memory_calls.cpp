// ncclMemAlloc/ncclMemFree and buffer registration.
//
// terse moves host memory, so ncclMemAlloc returns page-aligned host memory (posix_memalign)
// and ncclMemFree frees it; it never returns device memory, even when a GPU is present, and
// ncclMemFree must only be given what ncclMemAlloc returned. Registration has nothing to pin
// or map: ncclCommRegister returns a non-null handle (the buffer's address) and
// ncclCommDeregister accepts it.
#include <cstdlib>

#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"

using terse::fail;

TERSE_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ptr is null");
  if (size == 0) return fail(ncclInvalidArgument, "size is 0");
  void* memory = nullptr;
  if (posix_memalign(&memory, 4096, size) != 0) {
    return fail(ncclSystemError, "ncclMemAlloc: could not allocate %zu bytes", size);
  }
  *ptr = memory;
  return ncclSuccess;
}
TERSE_PROFILER_ALIAS(ncclMemAlloc)

TERSE_API ncclResult_t ncclMemFree(void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}
TERSE_PROFILER_ALIAS(ncclMemFree)

TERSE_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                        void** handle) {
  terse::Communicator* engine = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "ncclCommRegister", &engine));
  if (buff == nullptr) return fail(ncclInvalidArgument, "buff is null");
  if (handle == nullptr) return fail(ncclInvalidArgument, "handle is null");
  (void)size;
  *handle = buff;
  return ncclSuccess;
}
TERSE_PROFILER_ALIAS(ncclCommRegister)

TERSE_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  terse::Communicator* engine = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "ncclCommDeregister", &engine));
  if (handle == nullptr) return fail(ncclInvalidArgument, "handle is null");
  return ncclSuccess;
}
TERSE_PROFILER_ALIAS(ncclCommDeregister)
