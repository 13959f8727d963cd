// Preloaded into all_reduce_perf to prove its check can fail: every ncclAllReduce of two or more
// float elements goes to the real library, then its result is corrupted as CORRUPT_MODE says:
//   unset or "last"  the last element off by one (exact checks must see it);
//   "zero"           every element zero (a compressed row's #wrong must see it: a zero result
//                    passed the old bound check of top-k, sign and PowerSGD).
// (Calls of one element are the harness's own barriers and sums across ranks; those are left
// alone.) A result in device or managed memory (all_reduce_perf -B device) exists only once the
// call's stream has run it, so it is corrupted on that stream, after the call: the last element
// becomes a NaN (its bytes 0xff), or every element zero. The CUDA runtime's functions are the
// ones the program loaded, looked up at run time, so this library links none.
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

typedef ncclResult_t (*AllReduceFunction)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                          ncclComm_t, cudaStream_t);
typedef cudaError_t (*PointerAttributesFunction)(struct cudaPointerAttributes*, const void*);
typedef cudaError_t (*MemsetAsyncFunction)(void*, int, size_t, cudaStream_t);

static int on_device(const void* data) {
  PointerAttributesFunction attributes =
      (PointerAttributesFunction)dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes");
  struct cudaPointerAttributes found;
  memset(&found, 0, sizeof(found));
  if (attributes == NULL || attributes(&found, data) != cudaSuccess) return 0;
  return found.type == cudaMemoryTypeDevice || found.type == cudaMemoryTypeManaged;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static AllReduceFunction real = NULL;
  if (real == NULL) real = (AllReduceFunction)dlsym(RTLD_NEXT, "ncclAllReduce");
  ncclResult_t result = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (result == ncclSuccess && datatype == ncclFloat32 && count >= 2) {
    const char* mode = getenv("CORRUPT_MODE");
    const int zero = mode != NULL && strcmp(mode, "zero") == 0;
    if (on_device(recvbuff)) {
      MemsetAsyncFunction memset_async =
          (MemsetAsyncFunction)dlsym(RTLD_DEFAULT, "cudaMemsetAsync");
      if (zero) {
        memset_async(recvbuff, 0, count * sizeof(float), stream);
      } else {
        memset_async((float*)recvbuff + count - 1, 0xff, sizeof(float), stream);
      }
    } else if (zero) {
      memset(recvbuff, 0, count * sizeof(float));
    } else {
      ((float*)recvbuff)[count - 1] += 1.0f;
    }
  }
  return result;
}
