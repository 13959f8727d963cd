// Preloaded into all_reduce_perf to prove its check can fail: every ncclAllReduce of two or more
// float elements goes to the real library, then its result is corrupted as CORRUPT_MODE says:
//   unset or "last"  the last element off by one (exact checks must see it);
//   "zero"           every element zero (a compressed row's #wrong must see it: a zero result
//                    passed the old bound check of top-k, sign and PowerSGD).
// (Calls of one element are the harness's own barriers and sums across ranks; those are left
// alone.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

typedef ncclResult_t (*AllReduceFunction)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                          ncclComm_t, cudaStream_t);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static AllReduceFunction real = NULL;
  if (real == NULL) real = (AllReduceFunction)dlsym(RTLD_NEXT, "ncclAllReduce");
  ncclResult_t result = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (result == ncclSuccess && datatype == ncclFloat32 && count >= 2) {
    const char* mode = getenv("CORRUPT_MODE");
    if (mode != NULL && strcmp(mode, "zero") == 0) {
      memset(recvbuff, 0, count * sizeof(float));
    } else {
      ((float*)recvbuff)[count - 1] += 1.0f;
    }
  }
  return result;
}
