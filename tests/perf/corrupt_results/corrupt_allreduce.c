// Preloaded into all_reduce_perf to prove its check can fail: every ncclAllReduce of two or more
// float elements goes to the real library, then gets its last element off by one. (Calls of one
// element are the harness's own barriers and sums across ranks; those are left alone.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>

typedef ncclResult_t (*AllReduceFunction)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                          ncclComm_t, cudaStream_t);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static AllReduceFunction real = NULL;
  if (real == NULL) real = (AllReduceFunction)dlsym(RTLD_NEXT, "ncclAllReduce");
  ncclResult_t result = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (result == ncclSuccess && datatype == ncclFloat32 && count >= 2) {
    ((float*)recvbuff)[count - 1] += 1.0f;
  }
  return result;
}
